#pragma once

// The threads a backend lists on (a listing walks every node and must not hold up its I/O
// thread). A pool lists after every reconnect, so a long run under faults starts many: each is
// joined once it has finished, when the next starts, rather than all at the end (a finished
// thread not yet joined keeps its stack).

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <thread>

namespace kvtier {

class lister_threads {
 public:
  lister_threads() = default;
  lister_threads(const lister_threads&) = delete;
  lister_threads& operator=(const lister_threads&) = delete;
  ~lister_threads() { join_all(); }

  void start(std::function<void()> work) {
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    running_.push_back({std::thread([work = std::move(work), done] {
                          work();
                          done->store(true);
                        }),
                        done});
  }

  void join_all() {
    for (auto& r : running_)
      r.thread.join();
    running_.clear();
  }

 private:
  struct one {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<one> running_;
};

}  // namespace kvtier
