// Parquet, Arrow IPC and `datasets` directories as record sources, read with Apache
// Arrow C++ (pyarrow's libarrow/libparquet; src/ingest/CMakeLists.txt says why).
//
// Streaming: a Parquet file is read one row group at a time (pre-buffering only that
// row group's column chunks), an Arrow file one record batch at a time, an Arrow stream
// (what `save_to_disk` writes) message by message from a plain file, never mapped, so
// resident memory is a row group or a batch, whatever the file's size.
//
// A row becomes the JSON object of its columns (ingest/arrow_json.h). Built as the module
// libevenkeel_arrow.so (arrow_module.h), whose one export hands these functions to
// arrow_loader.cc.
#include "ingest/arrow_source.h"

#include <arrow/array.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "core/file.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "ingest/arrow_json.h"
#include "ingest/arrow_module.h"

namespace ek::ingest {

namespace {

namespace fs = std::filesystem;

// --- data files: one record batch at a time ---------------------------------------

Status ArrowReadError(const std::string& file, std::string_view as, const arrow::Status& s) {
  return CorruptError(
      fmt::format("{}: not readable as {}: {} (pyarrow reads it the same way: "
                  "check the file, or write it again with datasets or pyarrow)",
                  file, as, s.message()));
}

// One data file's batches in order.
class BatchReader {
 public:
  virtual ~BatchReader() = default;
  // The next batch, or null at the end of the file.
  virtual Result<std::shared_ptr<arrow::RecordBatch>> Next() = 0;
  virtual uint64_t consumed() const = 0;  // bytes of the file behind the batches read, about
  // The file's rows from its metadata, or nullopt when only reading tells (a stream).
  virtual std::optional<int64_t> rows() { return std::nullopt; }
};

// Where Arrow's buffers for the batches come from: jemalloc where the build has it
// (pyarrow's wheels do). Each batch allocates its pages and columns afresh; with the
// wheel's default pool (mimalloc) those pages went back to the kernel and faulted in
// zeroed again, half the reader's time (perf: clear_page), 350 MB/s of JSON from a
// 99 MB Parquet file against 630 MB/s with jemalloc (465 with glibc's malloc).
arrow::MemoryPool* ReadPool() {
  static arrow::MemoryPool* const pool = [] {
    arrow::MemoryPool* p = nullptr;
    if (arrow::jemalloc_memory_pool(&p).ok() && p != nullptr) return p;
    return arrow::default_memory_pool();
  }();
  return pool;
}

Result<std::shared_ptr<arrow::io::ReadableFile>> OpenDataFile(const std::string& path,
                                                              uint64_t* size) {
  struct stat st;
  EK_ASSIGN_OR_RETURN(int fd, OpenFileForRead(path, &st));
  *size = static_cast<uint64_t>(st.st_size);
  auto file = arrow::io::ReadableFile::Open(fd, ReadPool());  // owns fd from here, also on error
  if (!file.ok()) return OpenForReadError(path, EIO);
  return *std::move(file);
}

class ParquetBatches final : public BatchReader {
 public:
  static Result<std::unique_ptr<BatchReader>> Open(const std::string& path, uint64_t size,
                                                   std::shared_ptr<arrow::io::ReadableFile> file) {
    auto r = std::unique_ptr<ParquetBatches>(new ParquetBatches(path, size));
    parquet::ArrowReaderProperties props;
    props.set_batch_size(16 * 1024);
    // No pre-buffering: it reads a row group's column chunks whole into a cache (memory
    // of a row group's size) and measured a few percent slower on a local file
    // (bench/pack_parquet_vs_jsonl.py).
    props.set_pre_buffer(false);
    // Column chunks through a buffered stream, page by page, not read whole: a row group
    // is as large as its writer chose (`datasets` writes 100k-row groups, hundreds of MB
    // of text), and only a batch of it is decoded at a time.
    parquet::ReaderProperties reader_props(ReadPool());
    reader_props.enable_buffered_stream();
    reader_props.set_buffer_size(1 << 20);
    parquet::arrow::FileReaderBuilder builder;
    try {
      arrow::Status st = builder.Open(std::move(file), reader_props);
      if (!st.ok()) return ArrowReadError(path, "Parquet", st);
      builder.memory_pool(ReadPool());
      builder.properties(props);
      auto reader = builder.Build();
      if (!reader.ok()) return ArrowReadError(path, "Parquet", reader.status());
      r->reader_ = *std::move(reader);
      std::shared_ptr<arrow::Schema> schema;
      st = r->reader_->GetSchema(&schema);
      if (!st.ok()) return ArrowReadError(path, "Parquet", st);
      EK_RETURN_IF_ERROR(CheckSchema(*schema, path));
      r->groups_ = r->reader_->num_row_groups();
      r->rows_ = r->reader_->parquet_reader()->metadata()->num_rows();
    } catch (const std::exception& e) {  // parquet's internals throw ParquetException
      return ArrowReadError(path, "Parquet", arrow::Status::Invalid(e.what()));
    }
    return std::unique_ptr<BatchReader>(std::move(r));
  }

  Result<std::shared_ptr<arrow::RecordBatch>> Next() override {
    try {
      while (true) {
        if (!group_reader_) {
          if (group_ >= groups_) return std::shared_ptr<arrow::RecordBatch>();
          auto g = reader_->GetRecordBatchReader(std::vector<int>{group_++});
          if (!g.ok()) return ArrowReadError(path_, "Parquet", g.status());
          group_reader_ = *std::move(g);
        }
        std::shared_ptr<arrow::RecordBatch> batch;
        arrow::Status st = group_reader_->ReadNext(&batch);
        if (!st.ok()) return ArrowReadError(path_, "Parquet", st);
        if (batch) {
          rows_read_ += batch->num_rows();
          return batch;
        }
        group_reader_.reset();
      }
    } catch (const std::exception& e) {
      return ArrowReadError(path_, "Parquet", arrow::Status::Invalid(e.what()));
    }
  }
  uint64_t consumed() const override {
    return rows_ > 0 ? static_cast<uint64_t>(static_cast<double>(size_) * rows_read_ / rows_) : 0;
  }
  std::optional<int64_t> rows() override { return rows_; }

 private:
  ParquetBatches(std::string path, uint64_t size) : path_(std::move(path)), size_(size) {}
  std::string path_;
  uint64_t size_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  std::unique_ptr<arrow::RecordBatchReader> group_reader_;
  int groups_ = 0, group_ = 0;
  int64_t rows_ = 0, rows_read_ = 0;
};

// An Arrow IPC file ("ARROW1" at both ends, random access by batch).
class IpcFileBatches final : public BatchReader {
 public:
  IpcFileBatches(std::string path, uint64_t size,
                 std::shared_ptr<arrow::ipc::RecordBatchFileReader> r)
      : path_(std::move(path)), size_(size), reader_(std::move(r)) {}
  Result<std::shared_ptr<arrow::RecordBatch>> Next() override {
    if (next_ >= reader_->num_record_batches()) return std::shared_ptr<arrow::RecordBatch>();
    auto b = reader_->ReadRecordBatch(next_++);
    if (!b.ok()) return ArrowReadError(path_, "an Arrow IPC file", b.status());
    return *std::move(b);
  }
  std::optional<int64_t> rows() override {
    auto n = reader_->CountRows();  // the batches' metadata, no column is read
    return n.ok() ? std::optional<int64_t>(*n) : std::nullopt;
  }
  uint64_t consumed() const override {
    const int n = reader_->num_record_batches();
    return n > 0 ? size_ * static_cast<uint64_t>(next_) / static_cast<uint64_t>(n) : size_;
  }

 private:
  std::string path_;
  uint64_t size_;
  std::shared_ptr<arrow::ipc::RecordBatchFileReader> reader_;
  int next_ = 0;
};

// An Arrow IPC stream: what `datasets`' save_to_disk writes (data-00000-of-00001.arrow).
class IpcStreamBatches final : public BatchReader {
 public:
  IpcStreamBatches(std::string path, std::shared_ptr<arrow::io::ReadableFile> file,
                   std::shared_ptr<arrow::ipc::RecordBatchStreamReader> r)
      : path_(std::move(path)), file_(std::move(file)), reader_(std::move(r)) {}
  Result<std::shared_ptr<arrow::RecordBatch>> Next() override {
    std::shared_ptr<arrow::RecordBatch> batch;
    arrow::Status st = reader_->ReadNext(&batch);
    if (!st.ok()) return ArrowReadError(path_, "an Arrow IPC stream", st);
    return batch;
  }
  uint64_t consumed() const override {
    auto pos = file_->Tell();
    return pos.ok() ? static_cast<uint64_t>(*pos) : 0;
  }

 private:
  std::string path_;
  std::shared_ptr<arrow::io::ReadableFile> file_;
  std::shared_ptr<arrow::ipc::RecordBatchStreamReader> reader_;
};

arrow::ipc::IpcReadOptions IpcOptions() {
  arrow::ipc::IpcReadOptions o = arrow::ipc::IpcReadOptions::Defaults();
  o.memory_pool = ReadPool();
  return o;
}

Result<std::unique_ptr<BatchReader>> OpenIpc(const std::string& path, uint64_t size,
                                             std::shared_ptr<arrow::io::ReadableFile> file) {
  // The file format starts with "ARROW1"; a stream starts with its schema message.
  char magic[6] = {};
  auto got = file->ReadAt(0, sizeof magic, magic);
  if (!got.ok()) return ArrowReadError(path, "Arrow IPC", got.status());
  if (*got == 6 && std::string_view(magic, 6) == "ARROW1") {
    auto r = arrow::ipc::RecordBatchFileReader::Open(file, IpcOptions());
    if (!r.ok()) return ArrowReadError(path, "an Arrow IPC file", r.status());
    EK_RETURN_IF_ERROR(CheckSchema(*(*r)->schema(), path));
    return std::unique_ptr<BatchReader>(
        std::make_unique<IpcFileBatches>(path, size, *std::move(r)));
  }
  arrow::Status seek = file->Seek(0);  // a stream is read from its position
  if (!seek.ok()) return ArrowReadError(path, "Arrow IPC", seek);
  auto r = arrow::ipc::RecordBatchStreamReader::Open(file, IpcOptions());
  if (!r.ok()) return ArrowReadError(path, "an Arrow IPC stream or file", r.status());
  EK_RETURN_IF_ERROR(CheckSchema(*(*r)->schema(), path));
  return std::unique_ptr<BatchReader>(
      std::make_unique<IpcStreamBatches>(path, std::move(file), *std::move(r)));
}

Result<std::unique_ptr<BatchReader>> OpenBatches(const std::string& path, FileKind kind,
                                                 uint64_t* size) {
  EK_ASSIGN_OR_RETURN(auto file, OpenDataFile(path, size));
  if (kind == FileKind::kParquet) return ParquetBatches::Open(path, *size, std::move(file));
  return OpenIpc(path, *size, std::move(file));
}

// --- datasets directories -----------------------------------------------------------

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The data files of a save_to_disk directory (state.json's _data_files, in order); of
// a DatasetDict's (dataset_dict.json's splits) those of the split chosen.
Result<std::vector<std::string>> DatasetFiles(const std::string& dir, const OpenOptions& options) {
  EK_RETURN_IF_ERROR(CheckDirectory(dir));
  const fs::path root(dir);
  const fs::path dict = root / "dataset_dict.json";
  fs::path data_dir = root;
  JsonDocument doc;
  if (FileExists(dict.string())) {
    EK_ASSIGN_OR_RETURN(std::string text, ReadFile(dict.string()));
    EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(text, dict.string()));
    std::vector<std::string> splits;
    EK_RETURN_IF_ERROR(f.StrList("splits", &splits));
    if (splits.empty()) return CorruptError(fmt::format("{}: splits: empty", dict.string()));
    std::string split = options.split;
    if (split.empty()) {
      if (splits.size() > 1)
        return InvalidArgumentError(fmt::format(
            "{}: a DatasetDict with splits {}: choose one (--split NAME, or split = \"NAME\" "
            "in the run file's [[data.source]])",
            dir, JoinNames(splits)));
      split = splits[0];
    } else if (std::find(splits.begin(), splits.end(), split) == splits.end()) {
      return InvalidArgumentError(fmt::format("{}: no split \"{}\"; the DatasetDict has {}", dir,
                                              split, JoinNames(splits)));
    }
    if (split.find('/') != std::string::npos || split == "." || split == "..")
      return CorruptError(
          fmt::format("{}: split \"{}\" is not a directory name", dict.string(), split));
    data_dir = root / split;
  }
  const fs::path state = data_dir / "state.json";
  if (!FileExists(state.string()))
    return NotFoundError(fmt::format(
        "{}: no state.json{}: not a directory Dataset.save_to_disk or DatasetDict.save_to_disk "
        "wrote (load it with datasets and save_to_disk it, or name its .parquet/.arrow/.jsonl "
        "files)",
        data_dir.string(), data_dir == root ? " or dataset_dict.json" : ""));
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(state.string()));
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(text, state.string()));
  if (data_dir == root && !options.split.empty()) {
    // A Dataset has no splits; one saved from load_dataset(..., split=NAME) remembers it.
    std::string own;
    if (!f.AbsentOrNull("_split")) EK_RETURN_IF_ERROR(f.Str("_split", &own));
    if (own != options.split)
      return InvalidArgumentError(
          fmt::format("{}: a Dataset{}, not a DatasetDict: it has no split \"{}\" (drop --split)",
                      dir, own.empty() ? "" : fmt::format(" of split \"{}\"", own), options.split));
  }
  std::vector<std::string> files;
  EK_RETURN_IF_ERROR(f.Objects("_data_files", [&](const JsonFields& item) -> Status {
    std::string name;
    EK_RETURN_IF_ERROR(item.Str("filename", &name));
    const fs::path p(name);
    if (name.empty() || p.is_absolute() || name.find("..") != std::string::npos)
      return item.Err("filename", "not a file name inside the dataset's directory");
    files.push_back((data_dir / p).string());
    return Status::Ok();
  }));
  if (files.empty()) return CorruptError(fmt::format("{}: _data_files: empty", state.string()));
  return files;
}

Result<std::vector<std::string>> DataFiles(const std::string& path, FileKind kind,
                                           const OpenOptions& options) {
  if (kind == FileKind::kDatasetsDir) return DatasetFiles(path, options);
  if (kind != FileKind::kParquet && kind != FileKind::kArrow)
    return InternalError(fmt::format("{}: OpenArrowSource given an input of kind {} (not a table)",
                                     path, static_cast<int>(kind)));
  return std::vector<std::string>{path};
}

// --- the record source ------------------------------------------------------------------

// Reads one chunk ahead: while the caller tokenizes the records of one Next(), a thread
// of its own decodes the next batches and writes their JSON (the packer's reading is
// serial, between its parallel rounds; from JSON lines it costs a line split, from a
// table a decode and a JSON writer per cell, which this takes off the caller's path).
// One thread per open source, joined when the source is destroyed; at most two chunks of
// about batch_bytes each are held.
class TableSource final : public RecordSource {
 public:
  TableSource(FileKind kind, std::vector<std::string> files, const OpenOptions& options)
      : kind_(kind),
        files_(std::move(files)),
        batch_bytes_(std::max<size_t>(options.batch_bytes, 1)) {}
  ~TableSource() override {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Opens the first file and sums the sizes (so total_bytes() is known from the start),
  // then starts reading the first chunk.
  Status Start() {
    for (const std::string& f : files_) {
      struct stat st;
      if (::stat(f.c_str(), &st) != 0) return OpenForReadError(f, errno);
      total_ += static_cast<uint64_t>(st.st_size);
    }
    EK_RETURN_IF_ERROR(OpenFile(0));
    pending_ = true;
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  Result<bool> Next(std::vector<SourceRecord>* out) override {
    out->clear();
    if (done_reading_) return false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !pending_; });
      std::swap(current_, ahead_);  // the caller's previous records (now current_'s old) may go
      if (!current_.status.ok() || current_.ends.empty()) {
        done_reading_ = true;
        if (!current_.status.ok()) return current_.status;
        return false;
      }
      pending_ = true;  // fill ahead_ (the chunk the caller just gave back) meanwhile
    }
    cv_.notify_all();
    const std::string& s = current_.text.str();
    size_t begin = 0;
    out->reserve(current_.ends.size());
    for (const End& e : current_.ends) {
      out->push_back(
          {std::string_view(s).substr(begin, e.end - begin), e.number, e.file, Unit::kRow});
      begin = e.end;
    }
    return true;
  }
  FileKind kind() const override { return kind_; }
  uint64_t consumed_bytes() const override { return current_.consumed; }
  uint64_t total_bytes() const override { return total_; }

 private:
  struct End {
    size_t end;
    uint64_t number;
    const std::string* file;
  };
  struct Chunk {
    JsonWriter text;  // Clear()ed per fill: its buffer is allocated once
    std::vector<End> ends;
    Status status;
    uint64_t consumed = 0;  // input bytes behind this chunk's last record
  };

  // The read-ahead thread: fills ahead_ whenever asked, until stopped.
  void Loop() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return pending_ || stop_; });
        if (stop_) return;
      }
      Fill(&ahead_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        pending_ = false;
      }
      cv_.notify_all();
    }
  }

  // About batch_bytes of records (fewer at the end); an error stops the source.
  void Fill(Chunk* c) {
    c->text.Clear();
    c->ends.clear();
    c->status = Status::Ok();
    JsonWriter& w = c->text;
    while (w.str().size() < batch_bytes_) {
      if (row_ >= rows_) {
        Result<bool> more = NextBatch();
        if (!more.ok()) {
          c->status = more.status();
          c->ends.clear();
          return;
        }
        if (!*more) break;
        continue;
      }
      w.BeginObject();
      for (size_t k = 0; k < cells_.size(); ++k) {
        w.Key(names_[k]);
        cells_[k]->Write(row_, &w);
      }
      w.EndObject();
      ++row_;
      c->ends.push_back({w.str().size(), ++row_in_file_, &files_[file_]});
    }
    c->consumed = done_ + (reader_ ? std::min(reader_->consumed(), size_) : 0);
  }

  Status OpenFile(size_t i) {
    file_ = i;
    row_in_file_ = 0;
    const FileKind kind = kind_ == FileKind::kParquet ? FileKind::kParquet : FileKind::kArrow;
    EK_ASSIGN_OR_RETURN(reader_, OpenBatches(files_[i], kind, &size_));
    return Status::Ok();
  }

  // The next non-empty batch, across files; false at the end of the last.
  Result<bool> NextBatch() {
    cells_.clear();
    batch_.reset();
    row_ = rows_ = 0;
    while (true) {
      if (!reader_) return false;  // the last file ended at an earlier call
      EK_ASSIGN_OR_RETURN(batch_, reader_->Next());
      if (batch_) {
        if (batch_->num_rows() == 0) continue;
        break;
      }
      done_ += size_;
      reader_.reset();
      if (file_ + 1 >= files_.size()) return false;
      EK_RETURN_IF_ERROR(OpenFile(file_ + 1));
    }
    const arrow::Schema& schema = *batch_->schema();
    names_.clear();
    for (int k = 0; k < batch_->num_columns(); ++k) {
      names_.push_back(schema.field(k)->name());
      cells_.push_back(MakeCell(batch_->column(k)));
    }
    rows_ = batch_->num_rows();
    return true;
  }

  const FileKind kind_;
  const std::vector<std::string> files_;  // fixed: records point at its strings
  const size_t batch_bytes_;
  uint64_t total_ = 0;

  // The read-ahead thread's own, once started (Start() opens the first file before).
  uint64_t done_ = 0, size_ = 0;
  size_t file_ = 0;
  std::unique_ptr<BatchReader> reader_;
  std::shared_ptr<arrow::RecordBatch> batch_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Cell>> cells_;
  int64_t row_ = 0, rows_ = 0;
  uint64_t row_in_file_ = 0;

  // ahead_ is the thread's while pending_, the caller's current_ otherwise (mu_ guards
  // the hand-over).
  Chunk current_, ahead_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false, stop_ = false;
  bool done_reading_ = false;  // the caller's: the end or an error was returned
  std::thread thread_;
};

Result<std::unique_ptr<RecordSource>> OpenArrowSource(const std::string& path, FileKind kind,
                                                      const OpenOptions& options) {
  EK_ASSIGN_OR_RETURN(std::vector<std::string> files, DataFiles(path, kind, options));
  auto source = std::make_unique<TableSource>(kind, std::move(files), options);
  EK_RETURN_IF_ERROR(source->Start());
  return std::unique_ptr<RecordSource>(std::move(source));
}

Result<uint64_t> CountArrowRows(const std::string& path, FileKind kind,
                                const OpenOptions& options) {
  EK_ASSIGN_OR_RETURN(std::vector<std::string> files, DataFiles(path, kind, options));
  const FileKind file_kind = kind == FileKind::kParquet ? FileKind::kParquet : FileKind::kArrow;
  uint64_t rows = 0;
  for (const std::string& f : files) {
    uint64_t size = 0;
    EK_ASSIGN_OR_RETURN(auto reader, OpenBatches(f, file_kind, &size));
    if (auto n = reader->rows()) {
      rows += static_cast<uint64_t>(*n);
      continue;
    }
    while (true) {
      EK_ASSIGN_OR_RETURN(auto batch, reader->Next());
      if (!batch) break;
      rows += static_cast<uint64_t>(batch->num_rows());
    }
  }
  return rows;
}

Result<InputIdentity> IdentifyArrowInput(const std::string& path, FileKind kind,
                                         const OpenOptions& options) {
  EK_ASSIGN_OR_RETURN(std::vector<std::string> files, DataFiles(path, kind, options));
  InputIdentity id;
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<char> buf(1 << 20);
  Status status;
  for (const std::string& f : files) {
    auto fd = OpenFileForRead(f);
    if (!fd.ok()) {
      status = fd.status();
      break;
    }
    while (true) {
      const ssize_t n = ::read(*fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = OpenForReadError(f, errno);
        break;
      }
      if (n == 0) break;
      XXH3_64bits_update(state, buf.data(), static_cast<size_t>(n));
      id.size += static_cast<uint64_t>(n);
    }
    ::close(*fd);
    if (!status.ok()) break;
  }
  id.xxh3 = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (!status.ok()) return status;
  return id;
}

constexpr ArrowModuleApi kApi = {kArrowModuleAbi, ArrowModuleSizes(), OpenArrowSource,
                                 CountArrowRows, IdentifyArrowInput};

}  // namespace
}  // namespace ek::ingest

extern "C" __attribute__((visibility("default"))) const ek::ingest::ArrowModuleApi*
ek_arrow_module_api() {
  return &ek::ingest::kApi;
}
