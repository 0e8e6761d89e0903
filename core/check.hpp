#pragma once

// KVTIER_ASSERT stays on in every build: the simulator's value rests on its invariants, and a
// broken one must stop the run at the point of failure, not corrupt figures silently.

#include <cstdio>
#include <cstdlib>

#define KVTIER_ASSERT(cond)                                                            \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "kvtier: internal error: %s:%d: assertion failed: %s\n",   \
                   __FILE__, __LINE__, #cond);                                         \
      std::abort();                                                                    \
    }                                                                                  \
  } while (false)
