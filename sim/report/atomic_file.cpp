#include "sim/report/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <unistd.h>

namespace kvtier {

atomic_file::atomic_file(std::string path)
  : path_(std::move(path)),
    temp_(path_ + ".tmp." + std::to_string(::getpid())),
    out_(temp_, std::ios::binary | std::ios::trunc) {
  if (!out_)
    throw std::runtime_error(temp_ + ": cannot create: " + std::strerror(errno));
}

atomic_file::~atomic_file() {
  if (!committed_) {
    out_.close();
    std::remove(temp_.c_str());
  }
}

void atomic_file::commit() {
  out_.flush();
  bool ok = static_cast<bool>(out_);
  out_.close();
  if (!ok || std::rename(temp_.c_str(), path_.c_str()) != 0)
    throw std::runtime_error(path_ + ": cannot write: " + std::strerror(errno));
  committed_ = true;
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error(dir + ": cannot create directory: " + ec.message());
}

std::string seconds_text(int64_t ns) {
  bool negative = ns < 0;
  uint64_t v = negative ? static_cast<uint64_t>(-ns) : static_cast<uint64_t>(ns);
  uint64_t us = (v + 500) / 1000;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s%llu.%06llu", negative ? "-" : "",
                static_cast<unsigned long long>(us / 1000000),
                static_cast<unsigned long long>(us % 1000000));
  return buf;
}

}  // namespace kvtier
