// A fixed set of worker threads that live as long as the pool, so per-thread
// state (a tokenizer's piece cache) stays warm across batches.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ek {

class ThreadPool {
 public:
  // Workers(threads) workers.
  explicit ThreadPool(size_t threads);
  // How many workers a pool asked for `threads` has: 0 means
  // std::thread::hardware_concurrency() (at least one).
  static size_t Workers(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size(); }

  // Runs fn(task, worker) for task in [0, tasks), tasks taken in order by
  // whichever worker is free; returns when all are done. Not re-entrant.
  void ParallelFor(size_t tasks, const std::function<void(size_t task, size_t worker)>& fn);

 private:
  void Loop(size_t worker);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t tasks_ = 0, next_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace ek
