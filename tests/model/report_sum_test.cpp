// A cluster's reports summed (model/messages/report_sum.hpp): the field lists are complete (a
// list missing a field is caught), and every field sums as its rule says.

#include <catch2/catch.hpp>

#include "model/messages/report_sum.hpp"

using namespace kvtier;

namespace {

// A report whose list forgot a field: what adding a field to reports.hpp and not to
// report_sum.hpp looks like.
struct forgetful_report {
  uint64_t counted = 0;
  uint64_t also_counted = 0;
  uint64_t forgotten = 0;
};

}  // namespace

namespace kvtier::report_sum {
template <>
inline constexpr auto fields<forgetful_report> =
  std::make_tuple(sum<added>(&forgetful_report::counted),
                  sum<added>(&forgetful_report::also_counted));
}  // namespace kvtier::report_sum

namespace {

// Sets every number, flag and array of `r` from `k` up, and each list to one item, so that each
// field's sum can be told apart from every other's.
template <class Report>
void fill(Report& r, uint64_t k) {
  std::apply(
    [&](auto... f) {
      auto one = [&](auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>)
          v = k % 2 == 1;
        else if constexpr (std::is_arithmetic_v<T>)
          v = static_cast<T>(k++);
        else if constexpr (report_sum::is_array<T>::value)
          for (auto& x : v)
            x = static_cast<std::decay_t<decltype(x)>>(k++);
        else if constexpr (std::is_same_v<T, std::string>)
          v = "s" + std::to_string(k++);
        else if constexpr (std::is_same_v<T, std::vector<std::string>>)
          v = {"m" + std::to_string(k++)};
        else if constexpr (std::is_same_v<T, std::vector<link_report>>)
          v = {link_report{"pcie", k++, 2, 3}};
        else if constexpr (std::is_same_v<T, std::vector<request_record>>) {
          v = {request_record{}};
          v[0].req = k++;
        }
        else if constexpr (std::is_same_v<T, std::vector<step_record>> ||
                           std::is_same_v<T, std::vector<transfer_log>> ||
                           std::is_same_v<T, std::vector<swap_in_log>>)
          v.resize(1);
        else
          fill(v, k += 100);  // a report of its own
      };
      (one(r.*(f.member)), ...);
    },
    report_sum::fields<Report>);
}

// Every field of a + b against a's and b's, as its rule says.
template <class Report>
void check_sum(const Report& a, const Report& b, const Report& s) {
  std::apply(
    [&](auto... f) {
      auto one = [&](auto field) {
        using rule = typename decltype(field)::rule;
        const auto& x = a.*(field.member);
        const auto& y = b.*(field.member);
        const auto& z = s.*(field.member);
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<rule, report_sum::added>) {
          if constexpr (std::is_arithmetic_v<T>) {
            CHECK(z == x + y);
          } else if constexpr (report_sum::is_array<T>::value) {
            for (size_t i = 0; i < z.size(); ++i)
              CHECK(z[i] == x[i] + y[i]);
          } else {
            check_sum(x, y, z);
          }
        } else if constexpr (std::is_same_v<rule, report_sum::appended>) {
          CHECK(z.size() == x.size() + y.size());
        } else if constexpr (std::is_same_v<rule, report_sum::all_of>) {
          CHECK(z == (x && y));
        } else if constexpr (std::is_same_v<rule, report_sum::largest>) {
          CHECK(z == std::max(x, y));
        } else if constexpr (std::is_same_v<rule, report_sum::latest>) {
          CHECK(z == y);
        } else if constexpr (std::is_same_v<rule, report_sum::key>) {
          CHECK(z == x);
        } else {  // by_name: both lists name one link, "pcie"
          REQUIRE(z.size() == 1);
          CHECK(z[0].bytes == x[0].bytes + y[0].bytes);
          CHECK(z[0].transfers == x[0].transfers + y[0].transfers);
        }
      };
      (one(f), ...);
    },
    report_sum::fields<Report>);
}

template <class Report>
void sums_every_field() {
  Report a, b;
  fill(a, 1);
  fill(b, 1001);
  Report s = a;
  s += b;
  check_sum(a, b, s);
}

}  // namespace

TEST_CASE("report sums: a field left out of a report's list is caught", "[report][sum]") {
  STATIC_REQUIRE(field_count<forgetful_report>() == 3);
  STATIC_REQUIRE_FALSE(report_sum::lists_every_field<forgetful_report>());
  // The reports the cluster sums list all their fields (report_sum.hpp asserts it too).
  STATIC_REQUIRE(report_sum::lists_every_field<scheduler_report>());
  STATIC_REQUIRE(report_sum::lists_every_field<controller_report>());
  STATIC_REQUIRE(report_sum::lists_every_field<engine_report>());
  STATIC_REQUIRE(report_sum::lists_every_field<preemption_io>());
  STATIC_REQUIRE(report_sum::lists_every_field<prefetch_stats>());
  STATIC_REQUIRE(report_sum::lists_every_field<link_report>());
  // Counted by the compiler, not by hand: a declaration of several fields counts each.
  STATIC_REQUIRE(field_count<controller_report>() > field_count<preemption_io>());
}

TEST_CASE("report sums: every field of every report sums by its rule", "[report][sum]") {
  sums_every_field<scheduler_report>();
  sums_every_field<controller_report>();
  sums_every_field<engine_report>();
}

TEST_CASE("report sums: what a cluster's figures mean", "[report][sum]") {
  scheduler_report a, b;
  a.drained = true;
  b.drained = false;
  a.steps = 3;
  b.steps = 4;
  a.lag_ns = 10;
  b.lag_ns = 7;  // instances lag side by side: the worst one's
  a += b;
  CHECK(a.steps == 7);
  CHECK_FALSE(a.drained);
  CHECK(a.lag_ns == 10);

  engine_report e, f;
  e.links = {{"h2d", 100, 10, 1}};
  f.links = {{"d2h", 5, 1, 1}, {"h2d", 50, 5, 2}};
  f.backend = "modelled";
  e += f;
  REQUIRE(e.links.size() == 2);
  CHECK(e.links[0].name == "h2d");
  CHECK(e.links[0].bytes == 150);
  CHECK(e.links[0].transfers == 3);
  CHECK(e.links[1].name == "d2h");
  CHECK(e.backend == "modelled");
}
