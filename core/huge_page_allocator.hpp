#pragma once

// An allocator for the cache indexes (the radix tree's nodes and hash map, the storage index):
// tables of many megabytes probed at random, one cache miss per block, and with 4 KiB pages one
// TLB miss on top of it (a page walk through cold memory). An allocation of 1 MiB or more gets
// a mapping of its own, rounded up to whole 2 MiB pages (at most twice what was asked),
// 2 MiB-aligned and advised to the kernel as transparent huge pages (madvise, the mode Debian
// ships: /sys/kernel/mm/transparent_hugepage/enabled = madvise). Smaller ones come from the
// ordinary heap. Where the kernel gives no huge page the advice is ignored: nothing else
// changes. BENCHMARKS.md, "Replay speed", has what it saves.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
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
      return alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__
               ? static_cast<T*>(::operator new(bytes, std::align_val_t{alignof(T)}))
               : static_cast<T*>(::operator new(bytes));
    // A fresh mapping, not the heap's: memory the heap hands back was mapped in 4 KiB pages by
    // its earlier owner, and the advice does not remap pages already there. Mapped one huge
    // page longer than asked, then trimmed to a 2 MiB-aligned start.
    size_t rounded = rounded_size(bytes);
    void* m = ::mmap(nullptr, rounded + huge_page_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      throw std::bad_alloc();
    auto start = reinterpret_cast<uintptr_t>(m);
    uintptr_t aligned = (start + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    if (aligned > start)
      ::munmap(m, aligned - start);
    if (size_t tail = huge_page_bytes - (aligned - start); tail > 0)
      ::munmap(reinterpret_cast<void*>(aligned + rounded), tail);
    ::madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);  // advice only
    return reinterpret_cast<T*>(aligned);
  }

  void deallocate(T* p, size_t n) noexcept {
    size_t bytes = n * sizeof(T);
    if (bytes < huge_page_threshold) {
      if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
        ::operator delete(p, std::align_val_t{alignof(T)});
      else
        ::operator delete(p);
    } else {
      ::munmap(p, rounded_size(bytes));
    }
  }

  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const huge_page_allocator<U>&) const noexcept {
    return false;
  }

 private:
  static size_t rounded_size(size_t bytes) {
    return (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
  }
};

}  // namespace kvtier
