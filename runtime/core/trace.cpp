//===- trace.cpp - per-rank Chrome trace recorder and merge ----------------===//
#include "pipert/pipert_trace.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

struct Event {
  double ts;
  double dur;
  uint32_t name;
  uint32_t category;
  int32_t tid;
  // Non-null: the name is namer(args), made when the trace is written (the
  // events of every transfer and stage, whose names would otherwise cost a
  // formatting and an interning each while the rank runs).
  pipert_trace_namer namer;
  int64_t args[5];
};

// One recorder per process (one context per process, see pipert.h).
struct Recorder {
  bool enabled = false;
  bool paused = false; // enabled, but paused (pipert_trace_pause)
  int rank = 0;
  std::chrono::steady_clock::time_point origin;
  int64_t originUnixUs = 0;
  std::vector<Event> events;
  // Interned names: the views point into `strings` (a deque: they stay put),
  // so that a name already known is found without allocating.
  std::deque<std::string> strings;
  std::unordered_map<std::string_view, uint32_t> ids;

  uint32_t intern(const char *s) {
    if (!s)
      s = "";
    auto it = ids.find(std::string_view(s));
    if (it != ids.end())
      return it->second;
    uint32_t id = static_cast<uint32_t>(strings.size());
    strings.emplace_back(s);
    ids.emplace(std::string_view(strings.back()), id);
    return id;
  }
  std::string nameOf(const Event &e) const {
    if (!e.namer)
      return strings[e.name];
    char buf[256];
    buf[0] = '\0';
    e.namer(e.args, buf, sizeof buf);
    return buf;
  }
};

Recorder g_rec;

void appendEscaped(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

void appendNumber(std::string &out, double v) {
  char buf[40];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else if (std::isfinite(v))
    std::snprintf(buf, sizeof buf, "%.15g", v);
  else
    std::snprintf(buf, sizeof buf, "null");
  out += buf;
}

void appendTime(std::string &out, double us) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", us);
  out += buf;
}

//===--------------------------------------------------------------------===//
// A small JSON value, parser and writer, enough to merge trace files.
//===--------------------------------------------------------------------===//
struct Json {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;

  Json *get(const char *key) {
    if (type != Object)
      return nullptr;
    for (auto &kv : obj)
      if (kv.first == key)
        return &kv.second;
    return nullptr;
  }
};

class Parser {
public:
  explicit Parser(const std::string &text) : s(text) {}
  bool parse(Json &out, std::string &err) {
    if (!value(out, 0) || (skip(), pos != s.size())) {
      if (error.empty())
        error = "unexpected trailing characters";
      char buf[64];
      std::snprintf(buf, sizeof buf, " at offset %zu", pos);
      err = error + buf;
      return false;
    }
    return true;
  }

private:
  const std::string &s;
  size_t pos = 0;
  std::string error;

  void skip() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t'))
      ++pos;
  }
  bool fail(const char *m) {
    if (error.empty())
      error = m;
    return false;
  }
  bool literal(const char *lit) {
    size_t n = std::strlen(lit);
    if (s.compare(pos, n, lit) != 0)
      return fail("invalid literal");
    pos += n;
    return true;
  }
  bool string(std::string &out) {
    if (pos >= s.size() || s[pos] != '"')
      return fail("expected a string");
    ++pos;
    while (pos < s.size() && s[pos] != '"') {
      char c = s[pos++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= s.size())
        return fail("unterminated escape");
      char e = s[pos++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        if (pos + 4 > s.size())
          return fail("short \\u escape");
        unsigned cp = static_cast<unsigned>(std::stoul(s.substr(pos, 4), nullptr, 16));
        pos += 4;
        // Encode as UTF-8 (surrogate pairs are passed through as two code units).
        if (cp < 0x80) {
          out += static_cast<char>(cp);
        } else if (cp < 0x800) {
          out += static_cast<char>(0xC0 | (cp >> 6));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
          out += static_cast<char>(0xE0 | (cp >> 12));
          out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        }
        break;
      }
      default: return fail("invalid escape");
      }
    }
    if (pos >= s.size())
      return fail("unterminated string");
    ++pos;
    return true;
  }
  bool value(Json &out, int depth) {
    if (depth > 200)
      return fail("nesting too deep");
    skip();
    if (pos >= s.size())
      return fail("unexpected end of input");
    char c = s[pos];
    if (c == '{') {
      out.type = Json::Object;
      ++pos;
      skip();
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return true;
      }
      for (;;) {
        skip();
        std::string key;
        if (!string(key))
          return false;
        skip();
        if (pos >= s.size() || s[pos] != ':')
          return fail("expected ':'");
        ++pos;
        Json v;
        if (!value(v, depth + 1))
          return false;
        out.obj.emplace_back(std::move(key), std::move(v));
        skip();
        if (pos < s.size() && s[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < s.size() && s[pos] == '}') {
          ++pos;
          return true;
        }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out.type = Json::Array;
      ++pos;
      skip();
      if (pos < s.size() && s[pos] == ']') {
        ++pos;
        return true;
      }
      for (;;) {
        Json v;
        if (!value(v, depth + 1))
          return false;
        out.arr.push_back(std::move(v));
        skip();
        if (pos < s.size() && s[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < s.size() && s[pos] == ']') {
          ++pos;
          return true;
        }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out.type = Json::String;
      return string(out.str);
    }
    if (c == 't') {
      out.type = Json::Bool;
      out.b = true;
      return literal("true");
    }
    if (c == 'f') {
      out.type = Json::Bool;
      return literal("false");
    }
    if (c == 'n')
      return literal("null");
    const char *begin = s.c_str() + pos;
    char *end = nullptr;
    out.type = Json::Number;
    out.num = std::strtod(begin, &end);
    if (end == begin)
      return fail("invalid value");
    pos += static_cast<size_t>(end - begin);
    return true;
  }
};

void writeJson(std::string &out, const Json &j) {
  switch (j.type) {
  case Json::Null: out += "null"; break;
  case Json::Bool: out += j.b ? "true" : "false"; break;
  case Json::Number: appendNumber(out, j.num); break;
  case Json::String: appendEscaped(out, j.str); break;
  case Json::Array:
    out += '[';
    for (size_t i = 0; i < j.arr.size(); ++i) {
      if (i)
        out += ',';
      writeJson(out, j.arr[i]);
    }
    out += ']';
    break;
  case Json::Object:
    out += '{';
    for (size_t i = 0; i < j.obj.size(); ++i) {
      if (i)
        out += ',';
      appendEscaped(out, j.obj[i].first);
      out += ':';
      writeJson(out, j.obj[i].second);
    }
    out += '}';
    break;
  }
}

bool writeFile(const std::string &path, const std::string &data) {
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = (std::fclose(f) == 0) && ok;
  return ok;
}

void setError(char *err, size_t len, const std::string &msg) {
  if (err && len > 0) {
    std::snprintf(err, len, "%s", msg.c_str());
  }
}

} // namespace

extern "C" {

void pipert_trace_enable(pipert_context *, int rank) {
  g_rec.enabled = true;
  g_rec.rank = rank;
  g_rec.events.clear();
  g_rec.events.reserve(1 << 16);
  g_rec.origin = std::chrono::steady_clock::now();
  g_rec.originUnixUs = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
}

void pipert_trace_disable(pipert_context *) { g_rec.enabled = false; }
void pipert_trace_pause(pipert_context *, int paused) {
  if (paused) {
    g_rec.paused = g_rec.enabled;
    g_rec.enabled = false;
  } else if (g_rec.paused) {
    g_rec.enabled = true;
    g_rec.paused = false;
  }
}
int pipert_trace_enabled(const pipert_context *) { return g_rec.enabled ? 1 : 0; }

double pipert_trace_now_us(const pipert_context *) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                   g_rec.origin)
      .count();
}

void pipert_trace_event(pipert_context *, const char *name, const char *category, double ts_us,
                        double dur_us, int tid) {
  if (!g_rec.enabled)
    return;
  g_rec.events.push_back(Event{ts_us, dur_us < 0 ? 0 : dur_us, g_rec.intern(name),
                               g_rec.intern(category), tid, nullptr, {}});
}

void pipert_trace_end_named(pipert_context *ctx, pipert_trace_namer namer, const int64_t args[5],
                            const char *category, double begin_us, int tid) {
  if (!g_rec.enabled)
    return;
  const double dur = pipert_trace_now_us(ctx) - begin_us;
  Event e{begin_us, dur < 0 ? 0 : dur, 0, g_rec.intern(category), tid, namer, {}};
  std::memcpy(e.args, args, sizeof e.args);
  g_rec.events.push_back(e);
}

double pipert_trace_begin(pipert_context *ctx) {
  return g_rec.enabled ? pipert_trace_now_us(ctx) : 0.0;
}

void pipert_trace_end(pipert_context *ctx, const char *name, const char *category,
                      double begin_us, int tid) {
  if (!g_rec.enabled)
    return;
  pipert_trace_event(ctx, name, category, begin_us, pipert_trace_now_us(ctx) - begin_us, tid);
}

int64_t pipert_trace_stage_begin(pipert_context *ctx) {
  return g_rec.enabled ? int64_t(pipert_trace_now_us(ctx) * 1e3) : 0;
}

static void stageName(const int64_t a[5], char *buf, size_t size) {
  static const char *const kinds[] = {"F", "B", "W", "update"};
  const char *k = a[0] >= 0 && a[0] < 4 ? kinds[a[0]] : "?";
  if (a[0] == 3)
    std::snprintf(buf, size, "update s%lld", (long long)a[1]);
  else
    std::snprintf(buf, size, "%s%lld s%lld", k, (long long)a[2], (long long)a[1]);
}

void pipert_trace_stage_end(pipert_context *ctx, int32_t kind, int64_t stage, int64_t mb,
                            int64_t begin_ns) {
  if (!g_rec.enabled)
    return;
  const int64_t args[5] = {kind, stage, mb, 0, 0};
  pipert_trace_end_named(ctx, stageName, args, "stage", double(begin_ns) / 1e3, 0);
}

void pipert_trace_op_end(pipert_context *ctx, int64_t op, int32_t phase, int64_t begin_ns) {
  if (!g_rec.enabled)
    return;
  pipert_synchronize(ctx);
  const int64_t args[5] = {phase, op, 0, 0, 0};
  pipert_trace_end_named(
      ctx,
      [](const int64_t a[5], char *buf, size_t size) {
        static const char *const phases[] = {"fwd", "bwd", "upd"};
        std::snprintf(buf, size, "%s op%lld", a[0] >= 0 && a[0] < 3 ? phases[a[0]] : "?",
                      (long long)a[1]);
      },
      args, "op", double(begin_ns) / 1e3, 0);
}

double pipert_trace_op_overhead_us(pipert_context *ctx) {
  // What an op event adds to the op it times: the begin call's return, the
  // end call, the synchronization (CUDA: of an idle device) and the clock
  // read, i.e. the duration of an event around no op. The median of many
  // (noise only lengthens one); recorded and then taken out again.
  if (!g_rec.enabled)
    return 0.0;
  const size_t mark = g_rec.events.size();
  constexpr int kSamples = 2001;
  std::vector<double> durations;
  durations.reserve(kSamples);
  for (int i = 0; i < kSamples; ++i) {
    int64_t begin = pipert_trace_stage_begin(ctx);
    pipert_trace_op_end(ctx, -1, 0, begin);
    durations.push_back(g_rec.events.back().dur);
  }
  g_rec.events.resize(mark);
  std::nth_element(durations.begin(), durations.begin() + kSamples / 2, durations.end());
  return durations[kSamples / 2];
}

int64_t pipert_trace_event_count(const pipert_context *) {
  return static_cast<int64_t>(g_rec.events.size());
}

int pipert_trace_write(pipert_context *ctx, const char *path) {
  std::string out;
  out.reserve(128 + g_rec.events.size() * 110);
  out += "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"rank\":";
  appendNumber(out, g_rec.rank);
  out += ",\"origin_unix_us\":";
  appendNumber(out, static_cast<double>(g_rec.originUnixUs));
  // Only traces with per-op events (pipe-compile --profile-ops) pay for it.
  bool opEvents = false;
  if (auto op = g_rec.ids.find("op"); op != g_rec.ids.end())
    for (const Event &e : g_rec.events)
      if (e.category == op->second) {
        opEvents = true;
        break;
      }
  if (opEvents) {
    out += ",\"op_event_overhead_us\":";
    appendNumber(out, pipert_trace_op_overhead_us(ctx));
  }
  out += "},\"traceEvents\":[\n";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"name\":\"device %d\"}},\n",
                g_rec.rank, g_rec.rank);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"sort_index\":%d}},\n",
                g_rec.rank, g_rec.rank);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"name\":\"compute\"}},\n",
                g_rec.rank, PIPERT_TRACE_TID_COMPUTE);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"name\":\"transfers\"}}",
                g_rec.rank, PIPERT_TRACE_TID_TRANSFER);
  out += buf;
  for (const Event &e : g_rec.events) {
    out += ",\n{\"ph\":\"X\",\"name\":";
    appendEscaped(out, g_rec.nameOf(e));
    out += ",\"cat\":";
    appendEscaped(out, g_rec.strings[e.category]);
    std::snprintf(buf, sizeof buf, ",\"pid\":%d,\"tid\":%d,\"ts\":", g_rec.rank, e.tid);
    out += buf;
    appendTime(out, e.ts);
    out += ",\"dur\":";
    appendTime(out, e.dur);
    out += '}';
  }
  out += "\n]}\n";
  return writeFile(path, out) ? 0 : -1;
}

int pipert_trace_merge(const char *const *inputs, int n_inputs, const char *output, char *err,
                       size_t err_len) {
  if (n_inputs <= 0) {
    setError(err, err_len, "no trace files to merge");
    return -1;
  }
  std::vector<std::pair<double, std::vector<Json>>> parts; // origin, events
  double minOrigin = 0;
  bool haveOrigin = false;
  for (int i = 0; i < n_inputs; ++i) {
    std::ifstream in(inputs[i], std::ios::binary);
    if (!in) {
      setError(err, err_len, std::string("cannot open trace file '") + inputs[i] + "': " +
                                 std::strerror(errno));
      return -1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    Json root;
    std::string perr;
    if (!Parser(text).parse(root, perr)) {
      setError(err, err_len, std::string("trace file '") + inputs[i] + "' is not valid JSON: " + perr);
      return -1;
    }
    Json *events = nullptr;
    double origin = 0;
    if (root.type == Json::Array) {
      events = &root;
    } else if (root.type == Json::Object) {
      events = root.get("traceEvents");
      if (Json *other = root.get("otherData"))
        if (Json *o = other->get("origin_unix_us"); o && o->type == Json::Number) {
          origin = o->num;
          minOrigin = haveOrigin ? std::min(minOrigin, origin) : origin;
          haveOrigin = true;
        }
    }
    if (!events || events->type != Json::Array) {
      setError(err, err_len, std::string("trace file '") + inputs[i] + "' has no traceEvents array");
      return -1;
    }
    parts.emplace_back(origin, std::move(events->arr));
  }
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"merged_from\":";
  appendNumber(out, n_inputs);
  out += ",\"origin_unix_us\":";
  appendNumber(out, minOrigin);
  out += "},\"traceEvents\":[\n";
  bool first = true;
  for (auto &part : parts) {
    const double shift = haveOrigin && part.first != 0 ? part.first - minOrigin : 0;
    for (Json &e : part.second) {
      if (shift != 0)
        if (Json *ts = e.get("ts"); ts && ts->type == Json::Number)
          ts->num += shift;
      if (!first)
        out += ",\n";
      first = false;
      writeJson(out, e);
    }
  }
  out += "\n]}\n";
  if (!writeFile(output, out)) {
    setError(err, err_len, std::string("cannot write '") + output + "': " + std::strerror(errno));
    return -1;
  }
  return 0;
}

} // extern "C"
