#include <algorithm>

#include "core/check.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace {

// Heap order (std heaps keep the greatest on top): later arrival, then higher file index, then
// later source sinks. Each source is in file order, so ties within one file keep that order.
struct later {
  const std::vector<trace_request>* heads;
  bool operator()(uint32_t a, uint32_t b) const {
    const trace_request& x = (*heads)[a];
    const trace_request& y = (*heads)[b];
    if (x.arrival_ns != y.arrival_ns)
      return x.arrival_ns > y.arrival_ns;
    if (x.file != y.file)
      return x.file > y.file;
    return a > b;
  }
};

}  // namespace

trace_merger::trace_merger(std::vector<std::unique_ptr<trace_source>> sources)
    : sources_(std::move(sources)), heads_(sources_.size()) {
  for (uint32_t i = 0; i < sources_.size(); ++i)
    if (sources_[i]->next(heads_[i]))
      heap_.push_back(i);
  std::make_heap(heap_.begin(), heap_.end(), later{&heads_});
}

bool trace_merger::next(trace_request& out) {
  if (heap_.empty())
    return false;
  std::pop_heap(heap_.begin(), heap_.end(), later{&heads_});
  uint32_t source = heap_.back();
  // Swapping hands the caller the head and the source the caller's old buffers to refill.
  std::swap(out, heads_[source]);
  out.seq = next_seq_++;
  if (sources_[source]->next(heads_[source])) {
    // Readers guarantee this order; the merge would silently misorder without it.
    KVTIER_ASSERT(heads_[source].arrival_ns >= out.arrival_ns);
    std::push_heap(heap_.begin(), heap_.end(), later{&heads_});
  } else {
    heap_.pop_back();
  }
  return true;
}

uint64_t trace_merger::skipped() const {
  uint64_t n = 0;
  for (const auto& s : sources_)
    n += s->skipped();
  return n;
}

uint64_t trace_merger::bytes_read() const {
  uint64_t n = 0;
  for (const auto& s : sources_)
    n += s->bytes_read();
  return n;
}

uint64_t trace_merger::bytes_total() const {
  uint64_t n = 0;
  for (const auto& s : sources_)
    n += s->bytes_total();
  return n;
}

}  // namespace kvtier
