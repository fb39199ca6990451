// Why a rank failed, in one line, read from its log (attempt-NNN/rank-R.log,
// which holds the trainer's stdout and stderr). The reference trainer
// (python/evenkeel/train.py) prints, in this order of preference:
//   [rank R] error in PHASE after Xs at step S: TYPE: MESSAGE   (any exception)
//   [rank R] error: MESSAGE                                      (a refusal, exit 2)
//   [rank R] train: error: MESSAGE                               (before the process group)
// and an exception's traceback ends with its `TYPE: MESSAGE` line, which is
// what any other Python trainer leaves. The first of these in the log is the
// cause: the rank's own first error, not what the others died of after it.
#pragma once

#include <string>
#include <string_view>

namespace ek::launch {

// At most this many bytes of a cause (a gloo error can be kilobytes long).
inline constexpr size_t kMaxCauseBytes = 400;

// The cause named in `log` for global rank `rank`: "OSError: [Errno 28] No space
// left on device: '/ckpt/.step-00000030.tmp-77/model-00001-of-00001.safetensors' (in
// save (step 30))", "data.pack_dir ...: no such directory"; "" when the log names
// none (then the rank record's exit status or signal is all there is).
std::string FirstError(std::string_view log, int rank);

}  // namespace ek::launch
