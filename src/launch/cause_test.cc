// A failed rank's cause from its log (launch/cause.h), one case per line the
// trainer prints and for a plain Python traceback.
#include "launch/cause.h"

#include <gtest/gtest.h>

#include <string>

namespace ek::launch {
namespace {

TEST(FirstErrorTest, TheTrainersErrorLineGivesTheExceptionAndThePhase) {
  std::string log =
      "[rank 1] blocks=12 pinned=12 steps_per_epoch=6 total_steps=6 saves=3 evenfix=min\n"
      "[rank 1] warning: resuming with a different data layout\n"
      "[rank 1] error in save (step 30) after 0.4s at step 30: OSError: [Errno 28] No space left "
      "on device: "
      "'/ckpt/.step-00000030.tmp-77/model-00001-of-00001.safetensors'\n"
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 1, in <module>\n"
      "OSError: [Errno 28] No space left on device: "
      "'/ckpt/.step-00000030.tmp-77/model-00001-of-00001.safetensors'\n"
      "[rank 1] error in save (step 30) after 9.0s at step 30: RuntimeError: a second, later "
      "error\n";
  EXPECT_EQ(FirstError(log, 1),
            "OSError: [Errno 28] No space left on device: "
            "'/ckpt/.step-00000030.tmp-77/model-00001-of-00001.safetensors' (in save (step 30))");
}

// A SIGINT to a rank of a torch.distributed trainer: KeyboardInterrupt, uncaught, in a
// traceback torch's excepthook prefixes with "[rank0]: " (the precision table's S04).
TEST(FirstErrorTest, ATracebackPrefixedByTorchDistributedGivesItsLastLine) {
  std::string log =
      "[rank 0] step 2 epoch 0 loss 6.2 lr 0.003 tok/s 900\n"
      "[rank0]: Traceback (most recent call last):\n"
      "[rank0]:   File \"/t/precision_trainer.py\", line 82, in _ask_for_signal\n"
      "[rank0]:     time.sleep(0.05)\n"
      "[rank0]: KeyboardInterrupt\n";
  EXPECT_EQ(FirstError(log, 0), "KeyboardInterrupt");
  // A frame whose file changed on disk while the rank ran: Python prints today's line
  // under the old columns, and the markers lose their indent (seen with the tests' zygote).
  EXPECT_EQ(FirstError("[rank0]: Traceback (most recent call last):\n"
                       "[rank0]:   File \"/t/server.py\", line 155, in run_rank\n"
                       "[rank0]:     encoding=\"utf-8\")\n"
                       "[rank0]: ^^^^^^^^^^\n"
                       "[rank0]:   File \"/t/precision_trainer.py\", line 87, in _ask_for_signal\n"
                       "[rank0]:     time.sleep(0.05)\n"
                       "[rank0]: KeyboardInterrupt\n",
                       0),
            "KeyboardInterrupt");
  // Another rank's prefix is not this rank's traceback.
  EXPECT_EQ(FirstError("[rank1]: Traceback (most recent call last):\n"
                       "[rank1]:   File \"t.py\"\n"
                       "[rank1]: KeyboardInterrupt\n",
                       0),
            "");
}

TEST(FirstErrorTest, ARefusalLineIsItsMessage) {
  EXPECT_EQ(FirstError("[rank 0] run file r.toml\n[rank 0] error: /r/run.toml: data.pack_dir /p: "
                       "no such directory\n",
                       0),
            "/r/run.toml: data.pack_dir /p: no such directory");
  EXPECT_EQ(
      FirstError("[rank 3] train: error: --grad-accum 4 contradicts train.grad_accum = 8\n", 3),
      "--grad-accum 4 contradicts train.grad_accum = 8");
}

TEST(FirstErrorTest, APlainTracebackGivesItsLastLineAndAChainItsFirstException) {
  std::string log =
      "loading\n"
      "Traceback (most recent call last):\n"
      "  File \"t.py\", line 3, in <module>\n"
      "    open('/nope')\n"
      "FileNotFoundError: [Errno 2] No such file or directory: '/nope'\n"
      "\n"
      "During handling of the above exception, another exception occurred:\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"t.py\", line 5, in <module>\n"
      "RuntimeError: wrapped\n";
  EXPECT_EQ(FirstError(log, 0), "FileNotFoundError: [Errno 2] No such file or directory: '/nope'");
}

TEST(FirstErrorTest, NoErrorIsEmptyAndAnotherRanksLineIsNotThisOnes) {
  EXPECT_EQ(FirstError("", 0), "");
  EXPECT_EQ(FirstError("[rank 0] step 5 epoch 0 loss 1.0\n[rank 0] done steps=6\n", 0), "");
  EXPECT_EQ(FirstError("[rank 1] error: not rank 0's\n", 0), "");
  EXPECT_EQ(FirstError("[rank 12] error: rank 12's\n", 1), "");
  EXPECT_EQ(FirstError("Traceback (most recent call last):\n  File \"t.py\"\n", 0), "")
      << "cut short";
}

TEST(FirstErrorTest, ALongCauseIsBounded) {
  std::string cause = FirstError("[rank 0] error: " + std::string(5000, 'x') + "\n", 0);
  EXPECT_EQ(cause.size(), kMaxCauseBytes + 3);
  EXPECT_TRUE(cause.ends_with("..."));
}

}  // namespace
}  // namespace ek::launch
