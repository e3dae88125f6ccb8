//===- abi_test.cpp - the runtime's declarations against pipert_abi.def ----===//
//
// pipert_abi.def lists every runtime function pipec's generated code calls,
// with the signature the code generator emits (lib/Conversion/RuntimeABI.cpp
// checks each call against it). Here every entry is checked against the
// runtime's own C declarations at compile time: a declaration that changes
// without its entry (or the reverse) stops this file from compiling.
//
//===----------------------------------------------------------------------===//
#include "pipert/pipert.h"
#include "pipert/pipert_comm.h"
#include "pipert/pipert_data.h"
#include "pipert/pipert_driver.h"
#include "pipert/pipert_kernels.h"
#include "pipert/pipert_trace.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {
// The .def's type names.
struct ptr {};
struct i64 {};
struct i32 {};
struct f32 {};

// A C type as the code generator sees it.
template <typename T, typename = void> struct Abi { using type = T; };
template <typename T> struct Abi<T *> { using type = ptr; };
template <typename T>
struct Abi<T, std::enable_if_t<std::is_integral_v<T> && sizeof(T) == 8>> {
  using type = i64;
};
template <typename T>
struct Abi<T, std::enable_if_t<(std::is_integral_v<T> || std::is_enum_v<T>) && sizeof(T) == 4>> {
  using type = i32;
};
template <> struct Abi<float> { using type = f32; };
template <typename T> using abi_t = typename Abi<T>::type;

template <typename F> struct Signature;
template <typename R, typename... A> struct Signature<R (*)(A...)> {
  template <typename Result, typename... Args> static constexpr bool is() {
    return std::is_same_v<abi_t<R>, Result> &&
           std::is_same_v<std::tuple<abi_t<A>...>, std::tuple<Args...>>;
  }
};

#define PIPERT_FUNCTION(name, result, ...)                                     \
  static_assert(Signature<decltype(&name)>::is<result, __VA_ARGS__>(),         \
                #name "'s declaration does not match pipert_abi.def");
#include "pipert/pipert_abi.def"
#undef PIPERT_FUNCTION

const std::vector<std::string> &names() {
  static const std::vector<std::string> all = {
#define PIPERT_FUNCTION(name, result, ...) #name,
#include "pipert/pipert_abi.def"
#undef PIPERT_FUNCTION
  };
  return all;
}
} // namespace

TEST(Abi, TableIsSortedAndUnique) {
  const auto &all = names();
  ASSERT_FALSE(all.empty());
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_LT(all[i - 1], all[i]) << "pipert_abi.def is not sorted at " << all[i];
}

TEST(Abi, EveryFunctionIsDefined) {
  // Linking this test against pipert_cpu resolves every entry: an entry the
  // runtime declares but does not define fails the link.
#define PIPERT_FUNCTION(name, result, ...)                                     \
  EXPECT_NE(reinterpret_cast<const void *>(&name), nullptr) << #name;
#include "pipert/pipert_abi.def"
#undef PIPERT_FUNCTION
}
