//===- npz.cpp - .npz archives (zip of .npy) and the batch feeder -----------===//
//
// The zip reader follows the central directory (with ZIP64 extensions, which
// numpy always writes), then each local header to find the data, inflates
// deflate entries with zlib (raw inflate) and checks the CRC-32.
//===----------------------------------------------------------------------===//
#include "pipert/pipert_data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Array {
  std::string name;
  /// Listed, not loaded (pipert_npz_load_arrays did not ask for it).
  bool skipped = false;
  pipert_dtype dtype = PIPERT_F32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> data; // element bytes, C order
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

uint16_t rd16(const unsigned char *p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t rd32(const unsigned char *p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t rd64(const unsigned char *p) {
  return static_cast<uint64_t>(rd32(p)) | (static_cast<uint64_t>(rd32(p + 4)) << 32);
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

std::string shapeString(const int64_t *shape, int ndim) {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) {
    if (i)
      s += ", ";
    s += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  if (ndim == 1)
    s += ",";
  return s + ")";
}

bool dtypeFromDescr(const std::string &descr, pipert_dtype &out) {
  static const struct {
    const char *descr;
    pipert_dtype t;
  } table[] = {{"<f4", PIPERT_F32}, {"<f8", PIPERT_F64}, {"<i8", PIPERT_I64},
               {"<i4", PIPERT_I32}, {"|u1", PIPERT_U8},  {"<u1", PIPERT_U8},
               {"|i1", PIPERT_I8},  {"<i1", PIPERT_I8},  {"|b1", PIPERT_BOOL},
               {"<f2", PIPERT_F16}};
  for (const auto &e : table)
    if (descr == e.descr) {
      out = e.t;
      return true;
    }
  return false;
}

// Parses one .npy file held in memory; errors name the archive and array.
void parseNpy(const std::string &file, const std::string &name, const unsigned char *p, size_t n,
              Array &out) {
  auto bad = [&](const std::string &why) {
    pipert_fail("%s: array '%s': %s", file.c_str(), name.c_str(), why.c_str());
  };
  if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    bad("not a .npy array (bad magic)");
  const int major = p[6];
  size_t headerLen = 0, headerStart = 0;
  if (major == 1) {
    headerLen = rd16(p + 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (n < 12)
      bad("truncated .npy header");
    headerLen = rd32(p + 8);
    headerStart = 12;
  } else {
    bad("unsupported .npy format version " + std::to_string(major));
  }
  if (headerStart + headerLen > n)
    bad("truncated .npy header");
  const std::string h(reinterpret_cast<const char *>(p + headerStart), headerLen);

  auto valueAfter = [&](const char *key) -> size_t {
    size_t k = h.find(std::string("'") + key + "'");
    if (k == std::string::npos)
      bad(std::string("header has no '") + key + "'");
    size_t colon = h.find(':', k);
    if (colon == std::string::npos)
      bad("malformed header");
    size_t v = colon + 1;
    while (v < h.size() && h[v] == ' ')
      ++v;
    return v;
  };

  size_t d = valueAfter("descr");
  if (d >= h.size() || (h[d] != '\'' && h[d] != '"'))
    bad("unsupported descr (structured arrays are not supported)");
  size_t dEnd = h.find(h[d], d + 1);
  const std::string descr = h.substr(d + 1, dEnd - d - 1);
  if (!dtypeFromDescr(descr, out.dtype)) {
    if (!descr.empty() && descr[0] == '>')
      bad("big-endian dtype '" + descr + "' is not supported");
    bad("unsupported dtype '" + descr +
        "' (supported: float32, float64, float16, int64, int32, int8, uint8, bool)");
  }

  size_t f = valueAfter("fortran_order");
  if (h.compare(f, 4, "True") == 0)
    bad("Fortran-order arrays are not supported; save it with np.ascontiguousarray");
  if (h.compare(f, 5, "False") != 0)
    bad("malformed fortran_order");

  size_t s = valueAfter("shape");
  if (s >= h.size() || h[s] != '(')
    bad("malformed shape");
  size_t sEnd = h.find(')', s);
  if (sEnd == std::string::npos)
    bad("malformed shape");
  out.shape.clear();
  for (size_t i = s + 1; i < sEnd;) {
    while (i < sEnd && (h[i] == ' ' || h[i] == ','))
      ++i;
    if (i >= sEnd)
      break;
    char *end = nullptr;
    long long v = std::strtoll(h.c_str() + i, &end, 10);
    if (end == h.c_str() + i || v < 0)
      bad("malformed shape");
    out.shape.push_back(v);
    i = static_cast<size_t>(end - h.c_str());
  }
  // The product of the extents, refused where it overflows (the extents
  // are any 64-bit values, and a wrapped product could match the data).
  int64_t elements = 1;
  for (int64_t dim : out.shape)
    if (__builtin_mul_overflow(elements, dim, &elements))
      bad("shape " + shapeString(out.shape) + " has more elements than 64 bits count");
  int64_t bytesSigned = 0;
  if (__builtin_mul_overflow(elements, int64_t(pipert_dtype_size(out.dtype)), &bytesSigned))
    bad("shape " + shapeString(out.shape) + " has more bytes than 64 bits count");
  const size_t bytes = static_cast<size_t>(bytesSigned);
  const size_t dataStart = headerStart + headerLen;
  if (n - dataStart != bytes)
    bad("data has " + std::to_string(n - dataStart) + " bytes, shape " + shapeString(out.shape) +
        " of " + pipert_dtype_name(out.dtype) + " needs " + std::to_string(bytes));
  out.data.assign(p + dataStart, p + n);
}

/// A data file's bytes: mapped (read-only; pages shared with the other
/// ranks reading it, and only those touched are read), or read where it
/// cannot be mapped (empty, a pipe).
struct FileBytes {
  const unsigned char *data = nullptr;
  size_t size = 0;
  void *map = nullptr;
  std::vector<unsigned char> copy;
  FileBytes() = default;
  FileBytes(const FileBytes &) = delete;
  FileBytes &operator=(const FileBytes &) = delete;
  ~FileBytes() {
    if (map)
      munmap(map, size);
  }
};

std::vector<unsigned char> readFile(const char *path);

void mapFile(const char *path, FileBytes &out) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    pipert_fail("cannot open data file '%s': %s", path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void *m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      ::close(fd);
      out.map = m;
      out.data = static_cast<const unsigned char *>(m);
      out.size = size_t(st.st_size);
      return;
    }
  }
  ::close(fd);
  out.copy = readFile(path);
  out.data = out.copy.data();
  out.size = out.copy.size();
}

std::vector<unsigned char> readFile(const char *path) {
  std::FILE *f = std::fopen(path, "rb");
  if (!f)
    pipert_fail("cannot open data file '%s': %s", path, std::strerror(errno));
  std::vector<unsigned char> buf;
  unsigned char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0)
    buf.insert(buf.end(), chunk, chunk + got);
  const bool err = std::ferror(f);
  std::fclose(f);
  if (err)
    pipert_fail("cannot read data file '%s'", path);
  return buf;
}

} // namespace

struct pipert_npz {
  std::string path;
  std::vector<Array> arrays;

  const Array *find(const char *name) const {
    for (const Array &a : arrays)
      if (a.name == name)
        return &a;
    return nullptr;
  }
  const Array &get(const char *name) const {
    if (const Array *a = find(name)) {
      if (a->skipped)
        pipert_fail("%s: array '%s' was not loaded (this program does not read it)",
                    path.c_str(), name);
      return *a;
    }
    std::string have;
    for (const Array &a : arrays)
      have += (have.empty() ? "" : ", ") + a.name;
    pipert_fail("%s: no array named '%s' (arrays: %s)", path.c_str(), name,
                have.empty() ? "none" : have.c_str());
  }
};

extern "C" {

pipert_npz *pipert_npz_load(const char *path) {
  return pipert_npz_load_arrays(path, nullptr, -1);
}

pipert_npz *pipert_npz_load_arrays(const char *path, const char *const *names, int n) {
  FileBytes file;
  mapFile(path, file);
  const unsigned char *base = file.data;
  const size_t size = file.size;
  auto wanted = [&](const std::string &name) {
    if (n < 0)
      return true;
    for (int i = 0; i < n; ++i)
      if (name == names[i])
        return true;
    return false;
  };
  auto bad = [&](const char *why) { pipert_fail("%s: not a valid .npz archive: %s", path, why); };
  // [offset, offset + len) within the file, without the sum wrapping: the
  // offsets and sizes of a ZIP64 record are any 64-bit values (a locator
  // pointing at 2^64 - 8 passed `z64 + 56 > size`; found by the npz fuzzer).
  auto within = [&](uint64_t offset, uint64_t len) {
    return offset <= size && len <= size - offset;
  };

  // End of central directory: the last "PK\5\6" within the final 64 KiB + 22.
  if (size < 22)
    bad("file too small");
  size_t eocd = std::string::npos;
  for (size_t i = size - 22 + 1; i-- > (size > 65557 ? size - 65557 : 0);)
    if (rd32(base + i) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos)
    bad("no end of central directory");
  uint64_t entries = rd16(base + eocd + 10);
  uint64_t cdSize = rd32(base + eocd + 12);
  uint64_t cdOffset = rd32(base + eocd + 16);
  if (entries == 0xFFFF || cdSize == 0xFFFFFFFF || cdOffset == 0xFFFFFFFF) {
    // ZIP64 end of central directory locator precedes the EOCD.
    if (eocd < 20 || rd32(base + eocd - 20) != 0x07064b50)
      bad("missing ZIP64 locator");
    uint64_t z64 = rd64(base + eocd - 20 + 8);
    if (!within(z64, 56) || rd32(base + z64) != 0x06064b50)
      bad("bad ZIP64 end of central directory");
    entries = rd64(base + z64 + 32);
    cdSize = rd64(base + z64 + 40);
    cdOffset = rd64(base + z64 + 48);
  }
  if (!within(cdOffset, cdSize))
    bad("central directory out of range");

  auto *npz = new pipert_npz();
  npz->path = path;
  size_t p = cdOffset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (!within(p, 46) || rd32(base + p) != 0x02014b50)
      bad("bad central directory entry");
    const uint16_t flags = rd16(base + p + 8);
    const uint16_t method = rd16(base + p + 10);
    const uint32_t crc = rd32(base + p + 16);
    uint64_t csize = rd32(base + p + 20);
    uint64_t usize = rd32(base + p + 24);
    const uint16_t nameLen = rd16(base + p + 28);
    const uint16_t extraLen = rd16(base + p + 30);
    const uint16_t commentLen = rd16(base + p + 32);
    uint64_t localOffset = rd32(base + p + 42);
    if (!within(p, uint64_t(46) + nameLen + extraLen + commentLen))
      bad("central directory entry out of range");
    std::string name(reinterpret_cast<const char *>(base + p + 46), nameLen);
    // ZIP64 extra field: the 0xFFFFFFFF fields, in order usize, csize, offset.
    const unsigned char *x = base + p + 46 + nameLen, *xEnd = x + extraLen;
    while (x + 4 <= xEnd) {
      const uint16_t id = rd16(x), len = rd16(x + 2);
      if (id == 0x0001) {
        const unsigned char *q = x + 4;
        if (usize == 0xFFFFFFFF && q + 8 <= x + 4 + len) { usize = rd64(q); q += 8; }
        if (csize == 0xFFFFFFFF && q + 8 <= x + 4 + len) { csize = rd64(q); q += 8; }
        if (localOffset == 0xFFFFFFFF && q + 8 <= x + 4 + len) { localOffset = rd64(q); }
      }
      x += 4 + len;
    }
    p += 46 + nameLen + extraLen + commentLen;

    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    // Arrays are named through C strings: a NUL inside a name would make it
    // unreachable (found by the npz fuzzer).
    if (name.find('\0') != std::string::npos)
      bad("an array name contains a NUL byte");
    // numpy's np.load takes the last of two same-named members, this loader
    // took the first: which data trains would depend on the reader.
    if (npz->find(name.c_str()))
      pipert_fail("%s: holds two arrays named '%s' (a zip with a member added twice); "
                  "write it again with np.savez",
                  path, name.c_str());
    if (!wanted(name)) {
      Array a;
      a.name = name;
      a.skipped = true;
      npz->arrays.push_back(std::move(a));
      continue;
    }
    if (flags & 1)
      pipert_fail("%s: array '%s' is encrypted", path, name.c_str());
    if (!within(localOffset, 30) || rd32(base + localOffset) != 0x04034b50)
      pipert_fail("%s: array '%s': bad local header", path, name.c_str());
    const size_t dataStart =
        localOffset + 30 + rd16(base + localOffset + 26) + rd16(base + localOffset + 28);
    if (!within(dataStart, csize))
      pipert_fail("%s: array '%s' is truncated", path, name.c_str());

    std::vector<unsigned char> raw;
    const unsigned char *npy = base + dataStart;
    if (method == 0) {
      if (csize != usize)
        pipert_fail("%s: array '%s': stored sizes differ", path, name.c_str());
    } else if (method == 8) {
      // Deflate expands at most 1032:1: a larger declared size is a corrupt
      // header, not a reason to allocate it (found by the npz fuzzer).
      if (usize > csize * 1032 + 1024)
        pipert_fail("%s: array '%s': corrupt sizes (%llu bytes cannot inflate to %llu)", path,
                    name.c_str(), (unsigned long long)csize, (unsigned long long)usize);
      raw.resize(usize);
      z_stream zs{};
      if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
        pipert_fail("%s: zlib inflateInit failed", path);
      zs.next_in = const_cast<Bytef *>(npy);
      // zlib's sizes are uInt: feed large entries in pieces.
      zs.next_out = raw.data();
      uint64_t inLeft = csize, outLeft = usize;
      int rc = Z_OK;
      do {
        if (zs.avail_in == 0 && inLeft > 0) {
          zs.avail_in = static_cast<uInt>(std::min<uint64_t>(inLeft, 1u << 30));
          inLeft -= zs.avail_in;
        }
        if (zs.avail_out == 0 && outLeft > 0) {
          zs.avail_out = static_cast<uInt>(std::min<uint64_t>(outLeft, 1u << 30));
          outLeft -= zs.avail_out;
        }
        rc = inflate(&zs, Z_NO_FLUSH);
      } while (rc == Z_OK);
      const uint64_t outDone = zs.total_out;
      inflateEnd(&zs);
      if (rc != Z_STREAM_END || outDone != usize)
        pipert_fail("%s: array '%s': corrupt deflate data", path, name.c_str());
      npy = raw.data();
    } else {
      pipert_fail("%s: array '%s': unsupported zip compression method %u (only stored and "
                  "deflate)",
                  path, name.c_str(), method);
    }
    uLong c = crc32(0L, Z_NULL, 0);
    for (uint64_t off = 0; off < usize;) {
      const uInt n = static_cast<uInt>(std::min<uint64_t>(usize - off, 1u << 30));
      c = crc32(c, npy + off, n);
      off += n;
    }
    if (c != crc)
      pipert_fail("%s: array '%s': CRC mismatch (corrupt archive)", path, name.c_str());
    Array a;
    a.name = name;
    parseNpy(path, name, npy, usize, a);
    npz->arrays.push_back(std::move(a));
  }
  return npz;
}

void pipert_npz_free(pipert_npz *npz) { delete npz; }

int pipert_npz_count(const pipert_npz *npz) { return static_cast<int>(npz->arrays.size()); }

const char *pipert_npz_name(const pipert_npz *npz, int index) {
  if (index < 0 || index >= static_cast<int>(npz->arrays.size()))
    pipert_fail("%s: array index %d out of range (%zu arrays)", npz->path.c_str(), index,
                npz->arrays.size());
  return npz->arrays[index].name.c_str();
}

int pipert_npz_find(const pipert_npz *npz, const char *name) {
  for (size_t i = 0; i < npz->arrays.size(); ++i)
    if (npz->arrays[i].name == name)
      return static_cast<int>(i);
  return -1;
}

pipert_dtype pipert_npz_dtype(const pipert_npz *npz, const char *name) {
  return npz->get(name).dtype;
}
int pipert_npz_ndim(const pipert_npz *npz, const char *name) {
  return static_cast<int>(npz->get(name).shape.size());
}
const int64_t *pipert_npz_shape(const pipert_npz *npz, const char *name) {
  return npz->get(name).shape.data();
}

const void *pipert_npz_data(const pipert_npz *npz, const char *name, pipert_dtype dtype, int ndim,
                            const int64_t *shape) {
  const Array &a = npz->get(name);
  if (a.dtype != dtype)
    pipert_fail("%s: array '%s' has dtype %s, expected %s", npz->path.c_str(), name,
                pipert_dtype_name(a.dtype), pipert_dtype_name(dtype));
  if (ndim >= 0) {
    bool ok = static_cast<int>(a.shape.size()) == ndim;
    for (int i = 0; ok && i < ndim; ++i)
      ok = shape[i] < 0 || shape[i] == a.shape[i];
    if (!ok)
      pipert_fail("%s: array '%s' has shape %s, expected %s", npz->path.c_str(), name,
                  shapeString(a.shape).c_str(), shapeString(shape, ndim).c_str());
  }
  return a.data.data();
}

void pipert_microbatch_rows(int64_t batch, int64_t num_micro, int64_t k, int64_t *first,
                            int64_t *count) {
  if (num_micro <= 0 || num_micro > batch || k < 0 || k >= num_micro)
    pipert_fail("micro-batch %lld of %lld over a batch of %lld rows is out of range",
                static_cast<long long>(k), static_cast<long long>(num_micro),
                static_cast<long long>(batch));
  const int64_t base = batch / num_micro, extra = batch % num_micro;
  *count = base + (k < extra ? 1 : 0);
  *first = k * base + std::min(k, extra);
}

void pipert_microbatch_slice(pipert_context *ctx, void *dst, const void *src, int64_t row_bytes,
                             int64_t batch, int64_t num_micro, int64_t k) {
  int64_t first = 0, count = 0;
  pipert_microbatch_rows(batch, num_micro, k, &first, &count);
  pipert_copy_device(ctx, dst, static_cast<const char *>(src) + first * row_bytes,
                     static_cast<size_t>(count * row_bytes));
}

} // extern "C"

//===--------------------------------------------------------------------===//
// Feeder
//===--------------------------------------------------------------------===//

namespace {
uint64_t splitmix(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
} // namespace

struct pipert_feeder {
  pipert_context *ctx = nullptr;
  const pipert_npz *npz = nullptr;
  int64_t batch = 0;
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t rows = -1;
  struct Input {
    const Array *array;
    int64_t rowBytes;
  };
  std::vector<Input> inputs;
  // Permutations of the two most recent epochs: a step may straddle two.
  int64_t permEpoch[2] = {-1, -1};
  std::vector<int64_t> perm[2];
  std::vector<int64_t> stepRows;
  std::vector<unsigned char> staging;

  const std::vector<int64_t> &permutation(int64_t epoch) {
    for (int k = 0; k < 2; ++k)
      if (permEpoch[k] == epoch)
        return perm[k];
    const int slot = permEpoch[0] < permEpoch[1] ? 0 : 1; // replace the older epoch
    std::vector<int64_t> &p = perm[slot];
    p.resize(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i)
      p[i] = i;
    uint64_t state = seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(epoch + 1));
    for (int64_t i = rows - 1; i > 0; --i) {
      // Multiply-shift maps 64 random bits onto 0..i (bias ~ i / 2^64).
      const uint64_t r = splitmix(state);
      const int64_t j = static_cast<int64_t>(
          (static_cast<unsigned __int128>(r) * static_cast<uint64_t>(i + 1)) >> 64);
      std::swap(p[i], p[j]);
    }
    permEpoch[slot] = epoch;
    return p;
  }

  void computeRows(int64_t step, int64_t *out) {
    if (rows <= 0)
      pipert_fail("batch feeder: no inputs added");
    if (step < 0)
      pipert_fail("batch feeder: negative step %lld", static_cast<long long>(step));
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t g = step * batch + i;
      if (!shuffle) {
        out[i] = g % rows;
      } else {
        out[i] = permutation(g / rows)[static_cast<size_t>(g % rows)];
      }
    }
  }
};

extern "C" {

pipert_feeder *pipert_feeder_create(pipert_context *ctx, const pipert_npz *npz, int64_t batch,
                                    int shuffle, uint64_t seed) {
  if (!npz)
    pipert_fail("batch feeder: no data");
  if (batch <= 0)
    pipert_fail("batch feeder: batch size must be positive, got %lld",
                static_cast<long long>(batch));
  auto *f = new pipert_feeder();
  f->ctx = ctx;
  f->npz = npz;
  f->batch = batch;
  f->shuffle = shuffle != 0;
  f->seed = seed;
  f->stepRows.resize(static_cast<size_t>(batch));
  return f;
}

void pipert_feeder_destroy(pipert_feeder *feeder) { delete feeder; }

int pipert_feeder_add_input(pipert_feeder *f, const char *name, pipert_dtype dtype, int ndim,
                            const int64_t *shape) {
  const Array &a = f->npz->get(name);
  const char *path = f->npz->path.c_str();
  if (a.dtype != dtype)
    pipert_fail("%s: array '%s' has dtype %s, but input '%s' is %s", path, name,
                pipert_dtype_name(a.dtype), name, pipert_dtype_name(dtype));
  if (ndim < 1 || shape[0] != f->batch)
    pipert_fail("input '%s': batch shape %s must have the batch size %lld as its first dim", name,
                shapeString(shape, ndim < 0 ? 0 : ndim).c_str(), static_cast<long long>(f->batch));
  bool ok = static_cast<int>(a.shape.size()) == ndim;
  for (int i = 1; ok && i < ndim; ++i)
    ok = a.shape[i] == shape[i];
  if (!ok)
    pipert_fail("%s: array '%s' has shape %s, which does not fit input '%s' of shape %s (axis 0 "
                "is the sample axis)",
                path, name, shapeString(a.shape).c_str(), name, shapeString(shape, ndim).c_str());
  const int64_t n = a.shape[0];
  if (n == 0)
    pipert_fail("%s: array '%s' has no rows", path, name);
  if (f->rows >= 0 && n != f->rows)
    pipert_fail("%s: array '%s' has %lld rows but '%s' has %lld", path, name,
                static_cast<long long>(n), f->inputs[0].array->name.c_str(),
                static_cast<long long>(f->rows));
  f->rows = n;
  f->inputs.push_back({&a, static_cast<int64_t>(a.data.size() / static_cast<size_t>(n))});
  return static_cast<int>(f->inputs.size() - 1);
}

int64_t pipert_feeder_rows(const pipert_feeder *f) { return f->rows < 0 ? 0 : f->rows; }

void pipert_feeder_step_rows(pipert_feeder *f, int64_t step, int64_t *rows) {
  f->computeRows(step, rows);
}

void pipert_feeder_fill_microbatch(pipert_feeder *f, int64_t step, int input, int64_t num_micro,
                                   int64_t k, void *dst) {
  if (input < 0 || input >= static_cast<int>(f->inputs.size()))
    pipert_fail("batch feeder: input index %d out of range (%zu inputs)", input,
                f->inputs.size());
  int64_t first = 0, count = 0;
  pipert_microbatch_rows(f->batch, num_micro, k, &first, &count);
  f->computeRows(step, f->stepRows.data());
  const auto &in = f->inputs[input];
  const size_t rb = static_cast<size_t>(in.rowBytes);
  f->staging.resize(rb * static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(f->staging.data() + i * rb, in.array->data.data() + f->stepRows[first + i] * rb,
                rb);
  pipert_copy_to_device(f->ctx, dst, f->staging.data(), f->staging.size());
}

void pipert_feeder_fill(pipert_feeder *f, int64_t step, int input, void *dst) {
  pipert_feeder_fill_microbatch(f, step, input, 1, 0, dst);
}

} // extern "C"
