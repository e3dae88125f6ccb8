//===- checkpoint_io.h - atomic file writing shared by checkpoints/export --===//
#ifndef PIPERT_CORE_CHECKPOINT_IO_H
#define PIPERT_CORE_CHECKPOINT_IO_H

#include "pipert/pipert.h"

#include <cstdint>
#include <string>

namespace pipert_detail {

// mkdir -p; fatal on failure.
void makeDirs(const std::string &dir, const char *what);

// Writes <path>.tmp.<pid>, then commit() fsyncs it, renames it over <path>
// and fsyncs the directory. Any failure is fatal and removes the temporary
// file, leaving a previous <path> as it was; so does destruction without
// commit().
class AtomicFile {
public:
  AtomicFile(std::string path, const char *what);
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;
  void write(const void *data, size_t n);
  void commit();
  // CRC-32 of everything written so far.
  unsigned long crc() const { return crc_; }
  // Tests: the disk holds only `bytes` more bytes (then ENOSPC).
  void limitForTest(int64_t bytes) { room_ = bytes; }

private:
  std::string path_, tmp_;
  const char *what_;
  int fd_ = -1;
  unsigned long crc_ = 0;
  int64_t room_ = -1;
};

} // namespace pipert_detail

#endif
