// evenkeel._core: the loader's C++ API, as is. A Status becomes a Python
// exception here and nowhere else (Raise); everything else is type conversion.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ckpt/checkpoint.h"
#include "core/jsonl.h"
#include "loader/block_file.h"
#include "loader/epoch_order.h"
#include "packfile/manifest.h"
#include "run/model_dir.h"
#include "run/plan.h"
#include "run/run_file.h"

namespace py = pybind11;

namespace ek::loader {
namespace {

PyObject* g_error = nullptr;            // evenkeel.Error(RuntimeError)
PyObject* g_not_found_error = nullptr;  // evenkeel.NotFoundError(Error, FileNotFoundError)

[[noreturn]] void Raise(const Status& status) {
  PyErr_SetString(status.code() == StatusCode::kNotFound ? g_not_found_error : g_error,
                  status.message().c_str());
  throw py::error_already_set();
}

template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

py::array_t<int64_t> ToArray(const std::vector<uint64_t>& v) {
  py::array_t<int64_t> out(static_cast<py::ssize_t>(v.size()));
  auto w = out.mutable_unchecked<1>();
  for (size_t i = 0; i < v.size(); ++i) w(static_cast<py::ssize_t>(i)) = static_cast<int64_t>(v[i]);
  return out;
}

// A zero-length buffer still needs a non-null address for the buffer protocol.
const int32_t kNoBlocks[1] = {0};

}  // namespace
}  // namespace ek::loader

PYBIND11_MODULE(_core, m) {
  using namespace ek::loader;
  m.doc() = "evenkeel's C++ loader: block files, epoch orders, resume positions";

  g_error = PyErr_NewException("evenkeel.Error", PyExc_RuntimeError, nullptr);
  py::object bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_FileNotFoundError));
  g_not_found_error = PyErr_NewException("evenkeel.NotFoundError", bases.ptr(), nullptr);
  m.attr("Error") = py::handle(g_error);
  m.attr("NotFoundError") = py::handle(g_not_found_error);

  // The buffer is the whole mapping as a read-only (blocks, seq_len) int32
  // array; numpy views of it keep the BlockFile (and so the mapping) alive.
  py::class_<BlockFile>(m, "BlockFile", py::buffer_protocol())
      .def_static(
          "open",
          [](const std::string& pack_dir, int rank) {
            return Unwrap(BlockFile::Open(pack_dir, rank));
          },
          py::arg("pack_dir"), py::arg("rank"))
      .def_property_readonly("blocks", &BlockFile::blocks)
      .def_property_readonly("seq_len", &BlockFile::seq_len)
      .def_property_readonly("rank", &BlockFile::rank)
      .def_property_readonly("path", &BlockFile::path)
      .def_property_readonly("size_bytes", &BlockFile::size_bytes)
      .def_property_readonly(
          "address", [](const BlockFile& f) { return reinterpret_cast<uintptr_t>(f.data()); })
      .def_property_readonly("world", [](const BlockFile& f) { return f.manifest().world; })
      .def_property_readonly("vocab_size",
                             [](const BlockFile& f) { return f.manifest().vocab_size; })
      // The largest id the pack holds (tokenizer.max_id; vocab_size - 1 in an older pack).
      .def_property_readonly("max_id", [](const BlockFile& f) { return f.manifest().largest_id(); })
      .def_property_readonly("eos_id", [](const BlockFile& f) { return f.manifest().eos_id; })
      .def_property_readonly("global_min_blocks",
                             [](const BlockFile& f) { return f.manifest().min_blocks(); })
      .def_property_readonly("global_max_blocks",
                             [](const BlockFile& f) { return f.manifest().max_blocks(); })
      .def_property_readonly("has_mask", &BlockFile::has_mask)
      .def_property_readonly("loss_mask", [](const BlockFile& f) { return f.manifest().loss_mask; })
      .def_property_readonly("chat_template",
                             [](const BlockFile& f) { return f.manifest().chat_template; })
      // The loss mask as a read-only (blocks, seq_len) uint8 array over the
      // mapping (it keeps the BlockFile alive), or None for a pack without one.
      .def(
          "mask_array",
          [](py::object self) -> py::object {
            const BlockFile& f = self.cast<const BlockFile&>();
            if (!f.has_mask()) return py::none();
            static const uint8_t kNoMask[1] = {0};
            const uint8_t* data = f.blocks() == 0 ? kNoMask : f.mask();
            const auto rows = static_cast<py::ssize_t>(f.blocks());
            const auto cols = static_cast<py::ssize_t>(f.seq_len());
            py::array a(py::dtype::of<uint8_t>(), {rows, cols}, {cols, py::ssize_t{1}}, data, self);
            a.attr("flags").attr("writeable") = false;
            return a;
          })
      // The document boundaries (docs/pack_format.md) as a read-only 1-D uint64
      // array over the mapping (it keeps the BlockFile alive): ascending token
      // offsets where a segment begins, bit 63 set where a block's padding
      // begins. None for a pack made before them.
      .def_property_readonly("has_docs", &BlockFile::has_docs)
      .def("docs_array",
           [](py::object self) -> py::object {
             const BlockFile& f = self.cast<const BlockFile&>();
             if (!f.has_docs()) return py::none();
             static const uint64_t kNoDocs[1] = {0};
             auto docs = f.docs();
             const uint64_t* data = docs.empty() ? kNoDocs : docs.data();
             const auto n = static_cast<py::ssize_t>(docs.size());
             py::array a(py::dtype::of<uint64_t>(), {n}, {py::ssize_t{8}}, data, self);
             a.attr("flags").attr("writeable") = false;
             return a;
           })
      .def_buffer([](const BlockFile& f) {
        const int32_t* data = f.blocks() == 0 ? kNoBlocks : f.data();
        const auto rows = static_cast<py::ssize_t>(f.blocks());
        const auto cols = static_cast<py::ssize_t>(f.seq_len());
        return py::buffer_info(const_cast<int32_t*>(data), sizeof(int32_t),
                               py::format_descriptor<int32_t>::format(), 2, {rows, cols},
                               {cols * 4, py::ssize_t{4}}, /*readonly=*/true);
      });

  py::class_<EpochOrder>(m, "EpochOrder")
      .def_static(
          "make",
          [](uint64_t seed, uint64_t epoch, uint64_t local_blocks, uint64_t count, bool shuffle) {
            return Unwrap(EpochOrder::Make(seed, epoch, local_blocks, count, shuffle));
          },
          py::arg("seed"), py::arg("epoch"), py::arg("local_blocks"), py::arg("count"),
          py::arg("shuffle"))
      .def_property_readonly("count", &EpochOrder::count)
      .def_property_readonly("epoch", &EpochOrder::epoch)
      .def("at",
           [](const EpochOrder& o, uint64_t position) {
             if (position >= o.count())
               throw py::index_error("position " + std::to_string(position) + " >= count");
             return o.At(position);
           })
      .def("blocks", [](const EpochOrder& o) { return ToArray(o.Blocks()); });

  m.def(
      "permutation",
      [](uint64_t seed, uint64_t epoch, uint64_t n, bool shuffle) {
        return ToArray(Permutation(seed, epoch, n, shuffle));
      },
      py::arg("seed"), py::arg("epoch"), py::arg("n"), py::arg("shuffle") = true);

  // The run file, parsed and validated by the one C++ parser, with "section.key=value"
  // overrides (the trainer's --set) applied by the same parser, as JSON text
  // (run::RunFileToJson); evenkeel.RunFile wraps it.
  m.def(
      "read_run_file",
      [](const std::string& path, const std::vector<std::string>& overrides) {
        return ek::run::RunFileToJson(Unwrap(ek::run::ReadRunFile(path, overrides)));
      },
      py::arg("path"), py::arg("overrides") = std::vector<std::string>{});
  // The run's schedule (run::MakeSchedule, the one computation of steps, saves and
  // the learning-rate endpoints) as JSON text (run::ScheduleToJson); evenkeel.Plan
  // wraps it. Block counts come from the pack manifest at data.pack_dir, or, for a
  // node-local pack, from `rank_blocks` (every rank's count, gathered by the trainer).
  m.def(
      "plan_schedule",
      [](const std::string& run_path, std::optional<std::vector<uint64_t>> rank_blocks,
         const std::vector<std::string>& overrides) {
        ek::run::RunFile run = Unwrap(ek::run::ReadRunFile(run_path, overrides));
        if (rank_blocks) {
          return ek::run::ScheduleToJson(Unwrap(ek::run::MakeSchedule(run, *rank_blocks)));
        }
        return ek::run::ScheduleToJson(Unwrap(ek::run::ScheduleForRun(run)));
      },
      py::arg("run_path"), py::arg("rank_blocks") = py::none(),
      py::arg("overrides") = std::vector<std::string>{});
  // The model files a checkpoint carries (run::kCheckpointCopiedFiles): one list for
  // the writer (evenkeel.checkpoint) and the gate's storage plan.
  m.def("checkpoint_copied_files", [] {
    std::vector<std::string> names;
    for (const char* n : ek::run::kCheckpointCopiedFiles) names.emplace_back(n);
    return names;
  });
  // Raises unless the pack's ids mean the model's tokens (run::CheckTokenizerMatch).
  m.def(
      "check_model_tokenizer",
      [](const std::string& pack_dir, const std::string& model_dir) {
        ek::pack::Manifest manifest = Unwrap(ek::pack::ReadManifest(pack_dir));
        ek::run::ModelDir model = Unwrap(ek::run::ReadModelDir(model_dir));
        ek::Status st = ek::run::CheckTokenizerMatch(manifest, pack_dir, model);
        if (!st.ok()) Raise(st);
      },
      py::arg("pack_dir"), py::arg("model_dir"));

  // xxh3-64 of a file's bytes as 16 hex digits (the hash every evenkeel manifest records).
  m.def(
      "xxh3_file",
      [](const std::string& path) {
        uint64_t size = 0;
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx",
                      static_cast<unsigned long long>(Unwrap(ek::HashFile(path, &size))));
        return std::string(hex);
      },
      py::arg("path"));

  // Checkpoints (src/ckpt): the trainer writes shards into a temp directory, then
  // finalize hashes, writes evenkeel-checkpoint.json and renames it into place.
  m.def(
      "finalize_checkpoint",
      [](const std::string& temp_dir, const std::string& final_dir,
         const std::string& manifest_json) {
        ek::ckpt::CheckpointManifest meta = Unwrap(
            ek::ckpt::CheckpointManifestFromJson(manifest_json, "finalize_checkpoint manifest"));
        py::gil_scoped_release release;
        ek::Status st = ek::ckpt::FinalizeCheckpoint(temp_dir, final_dir, meta);
        py::gil_scoped_acquire acquire;
        if (!st.ok()) Raise(st);
      },
      py::arg("temp_dir"), py::arg("final_dir"), py::arg("manifest_json"));
  m.def(
      "prune_checkpoints",
      [](const std::string& ckpt_dir, int keep) {
        std::vector<std::string> removed;
        ek::Status st = ek::ckpt::PruneCheckpoints(ckpt_dir, keep, &removed);
        if (!st.ok()) Raise(st);
        return removed;
      },
      py::arg("ckpt_dir"), py::arg("keep"));
  // Returns {"ok", "problems", "step", "total_bytes", "tensor_count", "shard_count", "seconds",
  // "weights_ok", "has_train_state", "train_state_ok", "train_state_problems",
  // "train_state_world"}.
  m.def(
      "verify_checkpoint",
      [](const std::string& dir, bool full) {
        ek::Result<ek::ckpt::VerifyReport> r = [&] {
          py::gil_scoped_release release;
          return ek::ckpt::VerifyCheckpoint(
              dir, full ? ek::ckpt::VerifyLevel::kFull : ek::ckpt::VerifyLevel::kStructure);
        }();
        ek::ckpt::VerifyReport rep = Unwrap(std::move(r));
        py::dict d;
        d["ok"] = rep.ok;
        d["problems"] = rep.problems;
        d["step"] = rep.step;
        d["total_bytes"] = rep.total_bytes;
        d["tensor_count"] = rep.tensor_count;
        d["shard_count"] = rep.shard_count;
        d["seconds"] = rep.seconds;
        d["weights_ok"] = rep.weights_ok;
        d["has_train_state"] = rep.has_train_state;
        d["train_state_ok"] = rep.train_state_ok;
        d["train_state_problems"] = rep.train_state_problems;
        d["train_state_world"] = rep.train_state_world;
        return d;
      },
      py::arg("dir"), py::arg("full") = true);
  // Returns (evenkeel-checkpoint.json text of the newest verified checkpoint or None, its path,
  // warnings).
  m.def(
      "newest_verified_checkpoint",
      [](const std::string& ckpt_dir, bool full) -> py::tuple {
        std::vector<std::string> warnings;
        auto found = [&] {
          py::gil_scoped_release release;
          return ek::ckpt::NewestVerified(
              ckpt_dir, full ? ek::ckpt::VerifyLevel::kFull : ek::ckpt::VerifyLevel::kStructure,
              &warnings);
        }();
        std::optional<ek::ckpt::CheckpointEntry> entry = Unwrap(std::move(found));
        if (!entry) return py::make_tuple(py::none(), py::none(), warnings);
        ek::ckpt::CheckpointManifest manifest =
            Unwrap(ek::ckpt::ReadCheckpointManifest(entry->path));
        return py::make_tuple(ek::ckpt::CheckpointManifestToJson(manifest), entry->path, warnings);
      },
      py::arg("ckpt_dir"), py::arg("full") = true);
  // The checkpoint to resume from at `wanted` ("full" or "weights", the run file's
  // checkpoint.resume) by ckpt::NewestResumable: returns (evenkeel-checkpoint.json
  // text or None, its path or None, the level it gives "full"/"weights" or None,
  // warnings).
  m.def(
      "newest_resumable_checkpoint",
      [](const std::string& ckpt_dir, bool full, const std::string& wanted) -> py::tuple {
        std::optional<ek::ckpt::ResumeLevel> level = ek::ckpt::ParseResumeLevel(wanted);
        if (!level) {
          Raise(ek::InvalidArgumentError("newest_resumable_checkpoint: wanted '" + wanted +
                                         "' (full, weights)"));
        }
        std::vector<std::string> warnings;
        auto found = [&] {
          py::gil_scoped_release release;
          return ek::ckpt::NewestResumable(
              ckpt_dir, full ? ek::ckpt::VerifyLevel::kFull : ek::ckpt::VerifyLevel::kStructure,
              *level, &warnings);
        }();
        std::optional<ek::ckpt::Resumable> got = Unwrap(std::move(found));
        if (!got) return py::make_tuple(py::none(), py::none(), py::none(), warnings);
        ek::ckpt::CheckpointManifest manifest =
            Unwrap(ek::ckpt::ReadCheckpointManifest(got->entry.path));
        return py::make_tuple(ek::ckpt::CheckpointManifestToJson(manifest), got->entry.path,
                              std::string(ek::ckpt::ResumeLevelName(got->level)), warnings);
      },
      py::arg("ckpt_dir"), py::arg("full") = true, py::arg("wanted") = "full");

  // Returns (position, exhausted, block).
  m.def(
      "resume",
      [](const EpochOrder& order, uint64_t step, uint64_t micro_batch, uint64_t grad_accum) {
        ResumePoint p = Unwrap(Resume(order, step, micro_batch, grad_accum));
        return std::make_tuple(p.position, p.exhausted, p.block);
      },
      py::arg("order"), py::arg("step"), py::arg("micro_batch"), py::arg("grad_accum"));
}
