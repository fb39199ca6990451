#include "ingest/source.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <filesystem>

#include "core/file.h"
#include "core/jsonl.h"
#include "ingest/arrow_source.h"
#include "ingest/json_source.h"

namespace ek::ingest {

std::string_view FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kJsonLines:
      return "jsonl";
    case FileKind::kJson:
      return "json";
    case FileKind::kParquet:
      return "parquet";
    case FileKind::kArrow:
      return "arrow";
    case FileKind::kDatasetsDir:
      return "datasets";
  }
  return "?";
}

std::string Where(const SourceRecord& r) {
  const std::string_view file = r.file ? std::string_view(*r.file) : std::string_view("-");
  switch (r.unit) {
    case Unit::kLine:
      return fmt::format("{}:{}", file, r.number);
    case Unit::kElement:
      return fmt::format("{}: element {}", file, r.number);
    case Unit::kRow:
      break;
  }
  return fmt::format("{}: row {}", file, r.number);
}

namespace {

constexpr std::string_view kAccepted =
    "evenkeel reads .jsonl, .json (JSON lines or one array of objects), .jsonl.zst, .jsonl.gz, "
    ".parquet, .arrow and datasets directories (save_to_disk); convert with Hugging Face "
    "datasets: Dataset.to_json(\"x.jsonl\"), "
    "Dataset.to_parquet(\"x.parquet\") or Dataset.save_to_disk(\"dir\")";

// How the bytes of a file are to be read, beyond its FileKind.
struct Sniffed {
  FileKind kind = FileKind::kJsonLines;
  Codec codec = Codec::kPlain;
  bool array = false;  // a JSON text whose first non-space byte is '['
};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

Status Refuse(const std::string& path, std::string_view why) {
  return InvalidArgumentError(fmt::format("{}: {}; {}", path, why, kAccepted));
}

// The first non-space byte after a byte-order mark, or 0 when there is none.
char FirstByte(std::string_view head) {
  if (head.substr(0, 3) == "\xEF\xBB\xBF") head.remove_prefix(3);
  for (char c : head) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
  }
  return 0;
}

Result<Sniffed> SniffDirectory(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir(path);
  if (fs::is_regular_file(dir / "dataset_dict.json", ec) ||
      fs::is_regular_file(dir / "state.json", ec) ||
      fs::is_regular_file(dir / "dataset_info.json", ec)) {
    return Sniffed{FileKind::kDatasetsDir, Codec::kPlain, false};
  }
  return Refuse(path,
                "is a directory, expected a file or a datasets directory (save_to_disk writes "
                "dataset_info.json and state.json, or dataset_dict.json for a DatasetDict, and "
                "this directory has none of them)");
}

Result<Sniffed> Sniff(const std::string& path) {
  if (path == "-") return Sniffed{};
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return OpenForReadError(path, errno);
  if (S_ISDIR(st.st_mode)) return SniffDirectory(path);
  const std::string name = Lower(std::filesystem::path(path).filename().string());
  // Names that say what the file is, and it is not a kind evenkeel reads.
  for (std::string_view foreign : {".tar.gz", ".tgz", ".tar", ".tar.zst", ".zip", ".csv", ".csv.gz",
                                   ".tsv", ".txt", ".xlsx", ".parquet.gz"}) {
    if (EndsWith(name, foreign)) {
      const bool csv = foreign.find("sv") != std::string_view::npos;
      return Refuse(path, fmt::format("a {} file is not read{}", foreign.substr(1),
                                      csv ? " (load it with load_dataset(\"csv\", "
                                            "data_files=...) and write it out as one of these)"
                                          : ""));
    }
  }
  std::string head(4096, '\0');
  size_t got = 0;
  if (S_ISREG(st.st_mode)) {
    EK_ASSIGN_OR_RETURN(int fd, OpenFileForRead(path));
    ssize_t n;
    do {
      n = ::pread(fd, head.data(), head.size(), 0);
    } while (n < 0 && errno == EINTR);
    const int err = errno;
    ::close(fd);
    if (n < 0) return OpenForReadError(path, err);
    got = static_cast<size_t>(n);
  }
  head.resize(got);
  const bool zst_name = EndsWith(name, ".zst");
  // The bytes decide first: a misnamed file is read as what it is.
  if (head.size() >= 4 && head.compare(0, 4, "PAR1") == 0) return Sniffed{FileKind::kParquet};
  if (head.size() >= 6 && head.compare(0, 6, "ARROW1") == 0) return Sniffed{FileKind::kArrow};
  if (head.size() >= 4 && head.compare(0, 4, "\xFF\xFF\xFF\xFF") == 0)
    return Sniffed{FileKind::kArrow};  // an IPC stream (what datasets writes as .arrow)
  if (head.size() >= 4 && head.compare(0, 4, "\x28\xB5\x2F\xFD") == 0) {
    if (!zst_name) {
      return InvalidArgumentError(fmt::format(
          "{}: the file is zstd-compressed but its name does not end in .zst; rename it (e.g. "
          "to {}.zst) so it is read as compressed JSON lines",
          path, std::filesystem::path(path).filename().string()));
    }
    return Sniffed{EndsWith(name, ".json.zst") ? FileKind::kJson : FileKind::kJsonLines,
                   Codec::kZstd};
  }
  if (head.size() >= 2 && head.compare(0, 2, "\x1F\x8B") == 0)
    return Sniffed{EndsWith(name, ".json.gz") ? FileKind::kJson : FileKind::kJsonLines,
                   Codec::kGzip};
  if (zst_name && !head.empty()) {
    return InvalidArgumentError(fmt::format(
        "{}: named .zst but not zstd-compressed (no zstd magic); rename it without .zst if it "
        "is plain JSON lines",
        path));
  }
  const char first = FirstByte(head);
  const bool json_text = first == '{' || first == '[' || first == 0;
  if (EndsWith(name, ".parquet") || EndsWith(name, ".arrow")) {
    if (!json_text || head.empty()) {
      return Refuse(path, fmt::format("not a{} file (no {} magic at its start)",
                                      EndsWith(name, ".parquet") ? " Parquet" : "n Arrow IPC",
                                      EndsWith(name, ".parquet") ? "PAR1" : "ARROW1"));
    }
  } else if (!(EndsWith(name, ".jsonl") || EndsWith(name, ".json") || EndsWith(name, ".ndjson") ||
               EndsWith(name, ".jsonl.gz") || EndsWith(name, ".json.gz") ||
               EndsWith(name, ".zst"))) {
    // A name without a known extension (a pipe, a temp file): JSON text is read as such.
    const bool no_extension = name.find('.') == std::string::npos;
    if (!S_ISREG(st.st_mode)) return Sniffed{};  // a pipe or device: JSON lines
    if (!(no_extension && json_text && !head.empty()))
      return Refuse(path, "not a kind of input evenkeel reads");
  }
  Sniffed s;
  s.kind = EndsWith(name, ".json") || EndsWith(name, ".json.gz") ? FileKind::kJson
                                                                 : FileKind::kJsonLines;
  s.array = first == '[';
  return s;
}

}  // namespace

Result<FileKind> DetectKind(const std::string& path) {
  EK_ASSIGN_OR_RETURN(Sniffed s, Sniff(path));
  return s.kind;
}

Result<std::unique_ptr<RecordSource>> Open(const std::string& path, const OpenOptions& options) {
  EK_ASSIGN_OR_RETURN(Sniffed s, Sniff(path));
  switch (s.kind) {
    case FileKind::kParquet:
    case FileKind::kArrow:
    case FileKind::kDatasetsDir:
      return OpenArrowSource(path, s.kind, options);
    case FileKind::kJsonLines:
    case FileKind::kJson:
      break;
  }
  if (s.array && s.codec == Codec::kPlain) return OpenJsonArray(path, options);
  return OpenJsonLines(path, s.codec, s.kind, options);
}

Result<InputIdentity> IdentifyInput(const std::string& path, const OpenOptions& options) {
  EK_ASSIGN_OR_RETURN(Sniffed s, Sniff(path));
  if (s.kind == FileKind::kParquet || s.kind == FileKind::kArrow ||
      s.kind == FileKind::kDatasetsDir)
    return IdentifyArrowInput(path, s.kind, options);
  struct stat st;
  if (path == "-" || (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))) {
    return InvalidArgumentError(fmt::format(
        "{}: {} cannot be packed (the pack reads its inputs twice: once to count and hash "
        "them, once to pack); write it to a file first",
        path, path == "-" ? "standard input" : "a pipe or device"));
  }
  if (s.codec == Codec::kPlain && !s.array) return IdentifyPlainJsonLines(path);
  InputIdentity id;
  EK_ASSIGN_OR_RETURN(id.xxh3, HashFile(path, &id.size));
  return id;
}

Result<bool> ReadsItsIdentity(const std::string& path) {
  EK_ASSIGN_OR_RETURN(Sniffed s, Sniff(path));
  if (s.kind != FileKind::kJsonLines && s.kind != FileKind::kJson) return false;
  if (s.codec != Codec::kPlain || s.array || path == "-") return false;
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace ek::ingest
