//===- checkpoint.cpp - atomic per-rank checkpoints ------------------------===//
#include "pipert/pipert_checkpoint.h"
#include "checkpoint_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace pipert_detail {

void makeDirs(const std::string &dir, const char *what) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty())
      continue;
    if (::mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST)
      pipert_fail("%s: cannot create directory '%s': %s", what, partial.c_str(),
                  std::strerror(errno));
  }
}

AtomicFile::AtomicFile(std::string path, const char *what) : path_(std::move(path)), what_(what) {
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    pipert_fail("%s: cannot create '%s': %s", what_, tmp_.c_str(), std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void *data, size_t n) {
  const char *p = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t w;
    if (room_ >= 0 && n > static_cast<size_t>(room_)) {
      // The test hook's full disk: what fits, then ENOSPC.
      w = room_ > 0 ? ::write(fd_, p, static_cast<size_t>(room_)) : -1;
      if (w <= 0)
        errno = ENOSPC;
    } else {
      w = ::write(fd_, p, n);
    }
    if (w > 0 && room_ >= 0)
      room_ -= w;
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      ::unlink(tmp_.c_str());
      pipert_fail("%s: cannot write '%s': %s (the previous file, if any, is kept)", what_,
                  path_.c_str(), std::strerror(err));
    }
    crc_ = crc32(crc_, reinterpret_cast<const Bytef *>(p), static_cast<uInt>(w));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    pipert_fail("%s: cannot flush '%s': %s (the previous file, if any, is kept)", what_,
                path_.c_str(), std::strerror(err));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    pipert_fail("%s: cannot rename '%s' to '%s': %s", what_, tmp_.c_str(), path_.c_str(),
                std::strerror(err));
  }
  // Make the rename itself durable.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash ? slash : 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

} // namespace pipert_detail

namespace {

constexpr char kMagic[8] = {'P', 'I', 'P', 'E', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

template <typename T> void put(std::vector<unsigned char> &out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<unsigned char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xFF));
}

int64_t elementCount(const pipert_named_tensor &t, const char *what) {
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
    pipert_fail("%s: tensor '%s' has a bad shape", what, t.name ? t.name : "?");
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      pipert_fail("%s: tensor '%s' has a negative dimension", what, t.name);
    n *= t.shape[i];
  }
  return n;
}

std::string shapeString(const int64_t *shape, int ndim) {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

struct Reader {
  const std::vector<unsigned char> &buf;
  size_t pos = 0;
  const std::string &path;
  template <typename T> T get() {
    if (pos + sizeof(T) > buf.size())
      pipert_fail("checkpoint '%s' is truncated", path.c_str());
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      v |= static_cast<uint64_t>(buf[pos + i]) << (8 * i);
    pos += sizeof(T);
    return static_cast<T>(v);
  }
  const unsigned char *take(uint64_t n) {
    if (n > buf.size() - pos)
      pipert_fail("checkpoint '%s' is truncated", path.c_str());
    const unsigned char *p = buf.data() + pos;
    pos += n;
    return p;
  }
};

} // namespace

extern "C" {

const char *pipert_checkpoint_path(const char *dir, int rank, char *buf, size_t buf_len) {
  std::snprintf(buf, buf_len, "%s/rank-%d.ckpt", dir, rank);
  return buf;
}

void pipert_checkpoint_save(pipert_context *ctx, const char *dir, int rank, int64_t step,
                            uint64_t rng_state, const pipert_named_tensor *tensors, int n) {
  const char *what = "checkpoint save";
  pipert_detail::makeDirs(dir, what);
  char path[4096];
  pipert_checkpoint_path(dir, rank, path, sizeof path);
  std::vector<unsigned char> header(kMagic, kMagic + 8);
  put<uint32_t>(header, kVersion);
  put<uint32_t>(header, static_cast<uint32_t>(n));
  put<int64_t>(header, step);
  put<uint64_t>(header, rng_state);
  pipert_detail::AtomicFile file(path, what);
  // Fault injection for the tests: this rank's disk is full after the header.
  if (const char *r = std::getenv("PIPERT_TEST_DISK_FULL_IN_CHECKPOINT"))
    if (std::atoi(r) == rank)
      file.limitForTest(static_cast<int64_t>(header.size()) + 100);
  file.write(header.data(), header.size());
  std::vector<unsigned char> host;
  for (int i = 0; i < n; ++i) {
    const pipert_named_tensor &t = tensors[i];
    const int64_t count = elementCount(t, what);
    const size_t es = pipert_dtype_size(t.dtype);
    if (es == 0)
      pipert_fail("%s: tensor '%s' has unknown dtype %d", what, t.name, t.dtype);
    const uint64_t bytes = static_cast<uint64_t>(count) * es;
    std::vector<unsigned char> meta;
    const size_t nameLen = std::strlen(t.name);
    put<uint32_t>(meta, static_cast<uint32_t>(nameLen));
    meta.insert(meta.end(), t.name, t.name + nameLen);
    put<uint32_t>(meta, static_cast<uint32_t>(t.dtype));
    put<uint32_t>(meta, static_cast<uint32_t>(t.ndim));
    for (int d = 0; d < t.ndim; ++d)
      put<int64_t>(meta, t.shape[d]);
    put<uint64_t>(meta, bytes);
    file.write(meta.data(), meta.size());
    host.resize(bytes);
    if (bytes)
      pipert_copy_to_host(ctx, host.data(), t.data, bytes);
    file.write(host.data(), bytes);
    // Fault injection for the tests: this rank dies in the middle of the
    // write (the previous checkpoint must survive it). "R" kills rank R in
    // its first checkpoint, "R@N" in the one of step N.
    if (i == 0)
      if (const char *r = std::getenv("PIPERT_TEST_KILL_IN_CHECKPOINT")) {
        const char *at = std::strchr(r, '@');
        if (std::atoi(r) == rank && (!at || std::atoll(at + 1) == step))
          std::raise(SIGKILL);
      }
  }
  std::vector<unsigned char> trailer;
  put<uint32_t>(trailer, static_cast<uint32_t>(file.crc()));
  file.write(trailer.data(), trailer.size());
  file.commit();
}

const char *pipert_checkpoint_stage_dir(const char *dir, int64_t step, char *buf,
                                        size_t buf_len) {
  std::snprintf(buf, buf_len, "%s/step-%lld", dir, static_cast<long long>(step));
  return buf;
}

void pipert_checkpoint_commit(const char *dir, int64_t step) {
  // What the run that wrote the step was (pipe-run's record: the data's
  // order and file, the plan), with the step: a run that starts into DIR
  // and fails leaves the committed step's record as it was.
  if (const char *record = std::getenv("PIPERT_CHECKPOINT_RECORD"); record && *record) {
    char stage[4096];
    pipert_checkpoint_stage_dir(dir, step, stage, sizeof stage);
    pipert_detail::AtomicFile file(std::string(stage) + "/run-info", "checkpoint commit");
    file.write(record, std::strlen(record));
    file.commit();
  }
  const std::string text = "step-" + std::to_string(step) + "\n";
  pipert_detail::AtomicFile file(std::string(dir) + "/LATEST", "checkpoint commit");
  file.write(text.data(), text.size());
  file.commit();
}

static std::string latestName(const char *dir) {
  std::FILE *f = std::fopen((std::string(dir) + "/LATEST").c_str(), "r");
  if (!f)
    return "";
  char line[256] = {0};
  const bool ok = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  std::string name = ok ? line : "";
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r'))
    name.pop_back();
  if (name.rfind("step-", 0) != 0 || name.find('/') != std::string::npos)
    pipert_fail("checkpoint '%s': LATEST does not name a step directory ('%s')", dir,
                name.c_str());
  return name;
}

const char *pipert_checkpoint_resolve(const char *dir, char *buf, size_t buf_len) {
  const std::string latest = latestName(dir);
  if (latest.empty())
    std::snprintf(buf, buf_len, "%s", dir);
  else
    std::snprintf(buf, buf_len, "%s/%s", dir, latest.c_str());
  return buf;
}

void pipert_checkpoint_prune(const char *dir, int rank) {
  const std::string latest = latestName(dir);
  DIR *d = opendir(dir);
  if (!d)
    return;
  std::vector<std::string> stale;
  while (dirent *e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("step-", 0) == 0 && name != latest)
      stale.push_back(std::string(dir) + "/" + name);
  }
  closedir(d);
  for (const std::string &s : stale) {
    char path[4096];
    pipert_checkpoint_path(s.c_str(), rank, path, sizeof path);
    std::remove(path);
    if (rank == 0)
      std::remove((s + "/run-info").c_str());
    ::rmdir(s.c_str()); // succeeds once every rank's file is gone
  }
}

int pipert_checkpoint_load(pipert_context *ctx, const char *dir, int rank, int64_t *step,
                           uint64_t *rng_state, pipert_named_tensor *tensors, int n) {
  char cpath[4096];
  pipert_checkpoint_path(dir, rank, cpath, sizeof cpath);
  const std::string path = cpath;
  std::FILE *f = std::fopen(cpath, "rb");
  if (!f) {
    if (errno == ENOENT)
      return 1;
    pipert_fail("cannot open checkpoint '%s': %s", cpath, std::strerror(errno));
  }
  std::vector<unsigned char> buf;
  unsigned char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0)
    buf.insert(buf.end(), chunk, chunk + got);
  std::fclose(f);

  if (buf.size() < 8 + 4 + 4 + 8 + 8 + 4 || std::memcmp(buf.data(), kMagic, 8) != 0)
    pipert_fail("'%s' is not a pipert checkpoint", cpath);
  const uint32_t stored = static_cast<uint32_t>(buf[buf.size() - 4]) |
                          (static_cast<uint32_t>(buf[buf.size() - 3]) << 8) |
                          (static_cast<uint32_t>(buf[buf.size() - 2]) << 16) |
                          (static_cast<uint32_t>(buf[buf.size() - 1]) << 24);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t off = 0; off < buf.size() - 4;) {
    const uInt len = static_cast<uInt>(std::min<size_t>(buf.size() - 4 - off, 1u << 30));
    crc = crc32(crc, buf.data() + off, len);
    off += len;
  }
  if (static_cast<uint32_t>(crc) != stored)
    pipert_fail("checkpoint '%s' is corrupt or truncated (CRC mismatch)", cpath);

  Reader r{buf, 8, path};
  const uint32_t version = r.get<uint32_t>();
  if (version != kVersion)
    pipert_fail("checkpoint '%s' has format version %u, this runtime reads %u", cpath, version,
                kVersion);
  const uint32_t count = r.get<uint32_t>();
  const int64_t fileStep = r.get<int64_t>();
  const uint64_t fileRng = r.get<uint64_t>();

  std::vector<bool> found(static_cast<size_t>(n), false);
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t nameLen = r.get<uint32_t>();
    const unsigned char *np = r.take(nameLen);
    const std::string name(reinterpret_cast<const char *>(np), nameLen);
    const auto dtype = static_cast<pipert_dtype>(r.get<uint32_t>());
    const uint32_t ndim = r.get<uint32_t>();
    if (ndim > 64)
      pipert_fail("checkpoint '%s': tensor '%s' has %u dims", cpath, name.c_str(), ndim);
    std::vector<int64_t> shape(ndim);
    for (uint32_t d = 0; d < ndim; ++d)
      shape[d] = r.get<int64_t>();
    const uint64_t bytes = r.get<uint64_t>();
    const unsigned char *data = r.take(bytes);
    for (int k = 0; k < n; ++k) {
      pipert_named_tensor &t = tensors[k];
      if (name != t.name)
        continue;
      if (t.dtype != dtype)
        pipert_fail("checkpoint '%s': tensor '%s' is %s, expected %s", cpath, t.name,
                    pipert_dtype_name(dtype), pipert_dtype_name(t.dtype));
      bool same = static_cast<int>(ndim) == t.ndim;
      for (int d = 0; same && d < t.ndim; ++d)
        same = shape[d] == t.shape[d];
      if (!same)
        pipert_fail("checkpoint '%s': tensor '%s' has shape %s, expected %s", cpath, t.name,
                    shapeString(shape.data(), static_cast<int>(ndim)).c_str(),
                    shapeString(t.shape, t.ndim).c_str());
      if (bytes)
        pipert_copy_to_device(ctx, t.data, data, bytes);
      found[k] = true;
    }
  }
  for (int k = 0; k < n; ++k)
    if (!found[k])
      pipert_fail("checkpoint '%s' has no tensor '%s'", cpath, tensors[k].name);
  if (step)
    *step = fileStep;
  if (rng_state)
    *rng_state = fileRng;
  return 0;
}

} // extern "C"
