#include "core/thread_pool.h"

namespace ek {

size_t ThreadPool::Workers(size_t threads) {
  return threads ? threads : std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(size_t threads) {
  threads = Workers(threads);
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this, i] { Loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(size_t tasks, const std::function<void(size_t, size_t)>& fn) {
  if (tasks == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  fn_ = &fn;
  tasks_ = tasks;
  next_ = 0;
  finished_ = 0;
  ++generation_;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return finished_ == tasks_; });
  fn_ = nullptr;
}

void ThreadPool::Loop(size_t worker) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || (fn_ != nullptr && next_ < tasks_); });
    if (stop_) return;
    size_t task = next_++;
    const auto* fn = fn_;
    lock.unlock();
    (*fn)(task, worker);
    lock.lock();
    if (++finished_ == tasks_) done_cv_.notify_all();
  }
}

}  // namespace ek
