#pragma once

// A few threads that run blocking I/O jobs (the file backend's reads and writes), so that the
// actors that asked never block. Jobs run in the order posted (post_first: ahead of those waiting);
// the pool drains its queue before it stops.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvtier {

class io_pool {
 public:
  explicit io_pool(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i)
      threads_.emplace_back([this] { run(); });
  }
  ~io_pool() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_)
      t.join();
  }
  io_pool(const io_pool&) = delete;
  io_pool& operator=(const io_pool&) = delete;

  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }
  /// Ahead of every job waiting (a delete that gives space back goes before queued writes).
  void post_first(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      jobs_.push_front(std::move(job));
    }
    wake_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty())
          return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kvtier
