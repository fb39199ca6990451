#include "flightrec/loader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "core/file.h"

namespace ek::flightrec {

namespace fs = std::filesystem;

namespace {

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

struct Candidate {
  std::string path;
  int64_t rank;
};

// Drops dumps whose default-PG size disagrees with the majority (a file from
// another job) or whose rank lies outside the world.
void CheckWorld(LoadResult* out) {
  std::map<size_t, size_t> votes;
  for (const Dump& d : out->dumps) {
    size_t n = d.WorldRanks().size();
    if (n) ++votes[n];
  }
  size_t world = 0, best = 0;
  for (auto [n, count] : votes) {
    if (count > best) world = n, best = count;  // ties: the smaller world, deterministically
  }
  out->world_size = static_cast<int64_t>(world);
  if (!world) return;
  std::vector<Dump> kept;
  for (Dump& d : out->dumps) {
    size_t n = d.WorldRanks().size();
    Status bad;
    if (n && n != world) {
      bad = InvalidArgumentError(
          fmt::format("{}: world size {} differs from {} in {} other dumps: not from this job",
                      d.path, n, world, best));
    } else if (d.rank >= static_cast<int64_t>(world)) {
      bad = InvalidArgumentError(
          fmt::format("{}: rank {} is outside the world of {} ranks", d.path, d.rank, world));
    }
    if (bad.ok())
      kept.push_back(std::move(d));
    else
      out->bad.push_back({d.path, d.rank, bad});
  }
  out->dumps = std::move(kept);
}

}  // namespace

bool SplitRankName(const std::string& name, std::string* prefix, int64_t* rank) {
  size_t end = name.size(), d = end;
  while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') --d;
  if (d == end) return false;
  size_t p = d;
  while (p > 0 && IsWordChar(name[p - 1])) --p;
  // The lazy group of the regex takes as little as it can, but re.search
  // starts at the leftmost position that matches: the start of the run of
  // word characters ending at the digits. The digits are the longest run.
  *prefix = name.substr(p, d - p);
  auto [ptr, ec] = std::from_chars(name.data() + d, name.data() + end, *rank);
  return ec == std::errc();
}

Result<Dump> ReadDumpFile(const std::string& path, int64_t rank) {
  // read() into a per-thread buffer rather than mmap: a thousand munmaps in a
  // multi-threaded process cost TLB shootdowns, and dumps are small.
  thread_local std::string buffer;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(path + ": open", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(path + ": stat", err);
  }
  buffer.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < buffer.size()) {
    ssize_t n = ::read(fd, buffer.data() + got, buffer.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : 0;
      ::close(fd);
      if (err) return ErrnoError(path + ": read", err);
      break;
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return ParseDump(std::string_view(buffer.data(), got), path, rank);
}

Result<LoadResult> LoadDumps(const std::string& dir, const LoadOptions& options) {
  EK_RETURN_IF_ERROR(
      CheckDirectory(dir));  // "DIR: no such directory", "DIR: is a file, expected a directory"
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    std::string name = de.path().filename().string();
    if (name.empty() || name[0] == '.' || !de.is_regular_file(ec)) continue;
    names.push_back(name);
  }
  if (ec) return IoError(fmt::format("{}: {}", dir, ec.message()));
  std::sort(names.begin(), names.end());  // listing order never matters (see docs/fr.md)

  LoadResult out;
  std::vector<Candidate> files;
  if (!options.prefix.empty()) {
    out.prefix = options.prefix;
    for (const auto& name : names) {
      if (name.size() <= options.prefix.size() ||
          name.compare(0, options.prefix.size(), options.prefix) != 0)
        continue;
      std::string_view rest(name.data() + options.prefix.size(),
                            name.size() - options.prefix.size());
      int64_t rank = 0;
      auto [p, e] = std::from_chars(rest.data(), rest.data() + rest.size(), rank);
      if (e != std::errc() || p != rest.data() + rest.size()) continue;
      files.push_back({(fs::path(dir) / name).string(), rank});
    }
  } else {
    std::set<std::string> prefixes;
    for (const auto& name : names) {
      std::string prefix;
      int64_t rank;
      if (!SplitRankName(name, &prefix, &rank)) continue;
      prefixes.insert(prefix);
      files.push_back({(fs::path(dir) / name).string(), rank});
    }
    if (prefixes.size() > 1) {
      std::string list;
      for (const auto& p : prefixes) list += (list.empty() ? "'" : ", '") + p + "'";
      return InvalidArgumentError(
          fmt::format("{}: files with several prefixes ({}): pass --prefix", dir, list));
    }
    if (!prefixes.empty()) out.prefix = *prefixes.begin();
  }
  if (files.empty()) {
    return NotFoundError(fmt::format("{}: no flight-recorder dumps (files named {}<rank>)", dir,
                                     options.prefix.empty() ? "<prefix>" : options.prefix));
  }
  std::stable_sort(files.begin(), files.end(),
                   [](const Candidate& a, const Candidate& b) { return a.rank < b.rank; });

  std::vector<Result<Dump>> results(files.size(), Result<Dump>(InternalError("not read")));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();)
      results[i] = ReadDumpFile(files[i].path, files[i].rank);
  };
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp<int>(threads, 1, static_cast<int>(files.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0 && files[i].rank == files[i - 1].rank) {
      out.bad.push_back(
          {files[i].path, files[i].rank,
           InvalidArgumentError(fmt::format("{}: a second file for rank {} ({} is used)",
                                            files[i].path, files[i].rank, files[i - 1].path))});
      continue;
    }
    if (results[i].ok())
      out.dumps.push_back(std::move(results[i]).value());
    else
      out.bad.push_back({files[i].path, files[i].rank, results[i].status()});
  }
  CheckWorld(&out);
  std::sort(out.bad.begin(), out.bad.end(),
            [](const BadFile& a, const BadFile& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace ek::flightrec
