#pragma once

// An allocator for the cache indexes (the radix tree's nodes and hash map, the storage index):
// tables of many megabytes probed at random, one cache miss per block, and with 4 KiB pages one
// TLB miss on top of it (a page walk through cold memory). Allocations of 1 MiB or more are
// rounded up to whole 2 MiB pages, 2 MiB-aligned and advised to the kernel as transparent huge
// pages (madvise, the mode Debian ships: /sys/kernel/mm/transparent_hugepage/enabled = madvise):
// at most twice the memory asked, for tables that each cover hundreds of 4 KiB pages. Smaller
// ones come from the ordinary heap. Where the kernel gives no huge page the advice is ignored:
// nothing else changes.
// BENCHMARKS.md, "Replay speed", has what it saves.

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace kvtier {

inline constexpr size_t huge_page_bytes = size_t{2} << 20;
/// Allocations from this size on go to huge pages.
inline constexpr size_t huge_page_threshold = size_t{1} << 20;

template <class T>
class huge_page_allocator {
 public:
  using value_type = T;

  huge_page_allocator() noexcept = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) noexcept {}

  T* allocate(size_t n) {
    size_t bytes = n * sizeof(T);
    if (bytes < huge_page_threshold)
      return static_cast<T*>(::operator new(bytes));
    size_t rounded = (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    void* p = std::aligned_alloc(huge_page_bytes, rounded);
    if (!p)
      throw std::bad_alloc();
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without it the pages stay 4 KiB
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) < huge_page_threshold)
      ::operator delete(p);
    else
      std::free(p);
  }

  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const huge_page_allocator<U>&) const noexcept {
    return false;
  }
};

}  // namespace kvtier
