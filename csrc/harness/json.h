// A minimal streaming JSON writer (objects, arrays, strings, numbers, bools, null) for the result file.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

namespace cuco_harness {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(const std::string& k);
  JsonWriter& value(const std::string& s);
  JsonWriter& value(const char* s) { return value(std::string(s)); }
  JsonWriter& value(double d);  // NaN/Inf become null (JSON has no such numbers)
  JsonWriter& value(long long i);
  JsonWriter& value(unsigned long long i);  // seeds use the top bit (full-entropy inputs)
  template <typename I, typename std::enable_if<std::is_integral<I>::value && !std::is_same<I, bool>::value &&
                                                    !std::is_same<I, long long>::value &&
                                                    !std::is_same<I, unsigned long long>::value,
                                                int>::type = 0>
  JsonWriter& value(I i) {
    if (std::is_unsigned<I>::value) return value(static_cast<unsigned long long>(i));
    return value(static_cast<long long>(i));
  }
  JsonWriter& value(bool b);
  JsonWriter& null();
  template <typename T>
  JsonWriter& array(const std::vector<T>& xs) {
    begin_array();
    for (const T& x : xs) value(x);
    return end_array();
  }
  const std::string& str() const { return out_; }

  static std::string escape(const std::string& s);

 private:
  void comma();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace cuco_harness
