#pragma once

// A cluster's reports, summed over its instances: `sum += one instance's report`. Each report's
// fields are listed once below, each with how it sums; the list is checked against the struct's
// field count (core/field_count.hpp) when this header compiles, so a field added to a report in
// reports.hpp and not here is a compile error, not a figure silently missing from every cluster
// run (tests/model/report_sum_test.cpp shows the check firing and every field summing).

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>
#include <vector>

#include "core/field_count.hpp"
#include "model/messages/reports.hpp"

namespace kvtier {

namespace report_sum {

// How a field sums.
struct added {};     ///< counts and times: a + b (arrays element by element, structs by +=)
struct appended {};  ///< lists: a's items, then b's
struct all_of {};    ///< a flag that holds for the sum when it holds for every part
struct largest {};   ///< the worst instance's: max(a, b)
struct latest {};    ///< a description every instance shares: b's
struct by_name {};   ///< per-link figures: b's links added to a's of the same name
struct key {};       ///< what the items are matched by: a's stays

template <class Report, class T, class Rule>
struct field {
  T Report::*member;
  using rule = Rule;
};

template <class Rule, class Report, class T>
constexpr field<Report, T, Rule> sum(T Report::*member) {
  return {member};
}

/// Every field of `Report` and how it sums; specialised below for each summed report.
template <class Report>
inline constexpr auto fields = std::tuple<>{};

template <>
inline constexpr auto fields<link_report> = std::make_tuple(
  sum<key>(&link_report::name), sum<added>(&link_report::bytes),
  sum<added>(&link_report::busy_ns), sum<added>(&link_report::transfers));

template <>
inline constexpr auto fields<preemption_io> = std::make_tuple(
  sum<added>(&preemption_io::saved_blocks), sum<added>(&preemption_io::d2h_blocks),
  sum<added>(&preemption_io::stored_blocks), sum<added>(&preemption_io::unsaved_blocks),
  sum<added>(&preemption_io::named_blocks), sum<added>(&preemption_io::readmission_lookups),
  sum<added>(&preemption_io::marginal_d2h_blocks),
  sum<added>(&preemption_io::marginal_stored_blocks));

template <>
inline constexpr auto fields<prefetch_stats> = std::make_tuple(
  sum<added>(&prefetch_stats::started), sum<added>(&prefetch_stats::below_threshold),
  sum<added>(&prefetch_stats::ready_early), sum<added>(&prefetch_stats::timeouts),
  sum<added>(&prefetch_stats::protected_holds), sum<added>(&prefetch_stats::protected_released),
  sum<added>(&prefetch_stats::wasted_blocks), sum<added>(&prefetch_stats::admission_lookups));

template <>
inline constexpr auto fields<scheduler_report> = std::make_tuple(
  sum<appended>(&scheduler_report::requests), sum<added>(&scheduler_report::steps),
  sum<added>(&scheduler_report::probes), sum<added>(&scheduler_report::preemptions),
  sum<added>(&scheduler_report::recomputed_tokens), sum<added>(&scheduler_report::layer_wait_ns),
  sum<added>(&scheduler_report::reuse_wait_ns), sum<added>(&scheduler_report::busy_ns),
  sum<added>(&scheduler_report::prefill_tokens), sum<added>(&scheduler_report::decode_tokens),
  sum<added>(&scheduler_report::rejected), sum<added>(&scheduler_report::refused_admissions),
  // Instances lag behind the wall clock side by side: the run lags as its worst instance.
  sum<largest>(&scheduler_report::lag_ns), sum<largest>(&scheduler_report::lag_max_ns),
  sum<added>(&scheduler_report::layer_gap_ns), sum<appended>(&scheduler_report::step_log),
  sum<all_of>(&scheduler_report::drained), sum<added>(&scheduler_report::restored_tokens),
  sum<added>(&scheduler_report::pd_link_bytes), sum<added>(&scheduler_report::pd_link_busy_ns),
  sum<added>(&scheduler_report::pd_link_messages),
  sum<added>(&scheduler_report::handoff_blocks_sent),
  sum<added>(&scheduler_report::handoff_blocks_skipped),
  sum<added>(&scheduler_report::handoff_reads),
  sum<added>(&scheduler_report::handoff_read_failures),
  sum<added>(&scheduler_report::preallocations),
  sum<added>(&scheduler_report::preallocation_refusals),
  sum<added>(&scheduler_report::output_cache_writes),
  sum<added>(&scheduler_report::output_cache_blocks), sum<added>(&scheduler_report::decode_drops),
  sum<added>(&scheduler_report::decode_drop_writes),
  sum<added>(&scheduler_report::decode_drop_write_blocks),
  sum<added>(&scheduler_report::decode_drop_write_timeouts),
  sum<added>(&scheduler_report::decode_drop_write_wait_ns));

template <>
inline constexpr auto fields<controller_report> = std::make_tuple(
  sum<added>(&controller_report::device_evictions), sum<added>(&controller_report::host_evictions),
  sum<added>(&controller_report::dropped), sum<added>(&controller_report::backups),
  sum<added>(&controller_report::backups_skipped), sum<added>(&controller_report::write_backs),
  sum<added>(&controller_report::swap_ins), sum<added>(&controller_report::loads),
  sum<added>(&controller_report::stores), sum<added>(&controller_report::storage_probes),
  sum<added>(&controller_report::failed_loads), sum<added>(&controller_report::transfers),
  sum<added>(&controller_report::copies_in_flight),
  sum<added>(&controller_report::invariant_checked),
  sum<added>(&controller_report::invariant_violations),
  sum<appended>(&controller_report::invariant_messages),
  sum<added>(&controller_report::tree_nodes), sum<added>(&controller_report::device_used),
  sum<added>(&controller_report::host_used),
  sum<appended>(&controller_report::swap_ins_by_request),
  sum<added>(&controller_report::preemption), sum<added>(&controller_report::prefetch));

template <>
inline constexpr auto fields<engine_report> = std::make_tuple(
  sum<by_name>(&engine_report::links), sum<added>(&engine_report::transfers),
  sum<added>(&engine_report::bytes), sum<added>(&engine_report::failed),
  sum<added>(&engine_report::payload_errors), sum<added>(&engine_report::store_waits),
  sum<added>(&engine_report::store_wait_ns),
  // An upper bound: the instances' peaks need not coincide.
  sum<added>(&engine_report::storage_inflight_peak_bytes), sum<latest>(&engine_report::backend),
  sum<latest>(&engine_report::device), sum<appended>(&engine_report::log));

/// Whether `fields<Report>` names every field of `Report`.
template <class Report>
constexpr bool lists_every_field() {
  return std::tuple_size_v<std::decay_t<decltype(fields<Report>)>> == field_count<Report>();
}

static_assert(lists_every_field<link_report>(), "report_sum: a link_report field is not summed");
static_assert(lists_every_field<preemption_io>(),
              "report_sum: a preemption_io field is not summed");
static_assert(lists_every_field<prefetch_stats>(),
              "report_sum: a prefetch_stats field is not summed");
static_assert(lists_every_field<scheduler_report>(),
              "report_sum: a scheduler_report field is not summed");
static_assert(lists_every_field<controller_report>(),
              "report_sum: a controller_report field is not summed");
static_assert(lists_every_field<engine_report>(),
              "report_sum: an engine_report field is not summed");

template <class T>
struct is_array : std::false_type {};
template <class T, size_t N>
struct is_array<std::array<T, N>> : std::true_type {};

template <class T>
void combine(T& a, const T& b, added) {
  if constexpr (is_array<T>::value) {  // per_tier, per_transfer_kind
    for (size_t i = 0; i < a.size(); ++i)
      a[i] += b[i];
  } else {
    a += b;  // a number, or a report of its own (preemption_io, prefetch_stats)
  }
}

template <class T>
void combine(std::vector<T>& a, const std::vector<T>& b, appended) {
  a.insert(a.end(), b.begin(), b.end());
}

inline void combine(bool& a, bool b, all_of) {
  a = a && b;
}

template <class T>
void combine(T& a, const T& b, largest) {
  a = std::max(a, b);
}

template <class T>
void combine(T& a, const T& b, latest) {
  a = b;
}

template <class T>
void combine(T&, const T&, key) {}

inline void combine(std::vector<link_report>& a, const std::vector<link_report>& b, by_name);

/// a += b, field by field, as `fields<Report>` says.
template <class Report>
Report& add(Report& a, const Report& b) {
  std::apply(
    [&](auto... f) {
      (combine(a.*(f.member), b.*(f.member), typename decltype(f)::rule{}), ...);
    },
    fields<Report>);
  return a;
}

}  // namespace report_sum

inline link_report& operator+=(link_report& a, const link_report& b) {
  return report_sum::add(a, b);
}
inline preemption_io& operator+=(preemption_io& a, const preemption_io& b) {
  return report_sum::add(a, b);
}
inline prefetch_stats& operator+=(prefetch_stats& a, const prefetch_stats& b) {
  return report_sum::add(a, b);
}
/// requests and step_log keep the instances' order; the caller sorts what it needs sorted.
inline scheduler_report& operator+=(scheduler_report& a, const scheduler_report& b) {
  return report_sum::add(a, b);
}
/// invariant_messages come as they are: a cluster names each instance's (sim/full/).
inline controller_report& operator+=(controller_report& a, const controller_report& b) {
  return report_sum::add(a, b);
}
inline engine_report& operator+=(engine_report& a, const engine_report& b) {
  return report_sum::add(a, b);
}

namespace report_sum {

inline void combine(std::vector<link_report>& a, const std::vector<link_report>& b, by_name) {
  for (const link_report& l : b) {
    auto it = std::find_if(a.begin(), a.end(),
                           [&](const link_report& s) { return s.name == l.name; });
    if (it == a.end())
      a.push_back(l);
    else
      *it += l;
  }
}

}  // namespace report_sum

}  // namespace kvtier
