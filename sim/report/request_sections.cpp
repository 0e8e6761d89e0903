#include "sim/report/summary_sections.hpp"

#include "sim/report/summary_math.hpp"

namespace kvtier {

using nlohmann::json;

json trace_section(const full_result& r, const run_info& run,
                   const std::vector<trace_file_info>& files) {
  json file_list = json::array();
  uint64_t skipped = 0;
  for (const auto& f : files) {
    file_list.push_back({{"path", f.path}, {"format", f.format}, {"requests", f.requests},
                         {"skipped_lines", f.skipped_lines}});
    skipped += f.skipped_lines;
  }
  return {{"files", file_list}, {"requests", r.scheduler.requests.size()},
          {"blocks", run.trace.blocks}, {"input_tokens", run.trace.input_tokens},
          {"output_tokens", run.trace.output_tokens}, {"skipped_lines", skipped}};
}

json requests_section(const full_result& r, const request_tally& t) {
  const scheduler_report& s = r.scheduler;
  json out = {{"finished", t.finished}, {"rejected", s.rejected},
              {"unfinished", s.requests.size() - t.finished - s.rejected},
              {"finished_blocks", t.blocks}, {"finished_input_tokens", t.input},
              {"finished_output_tokens", t.output},
              {"rejected_input_tokens", t.rejected_input},
              {"rejected_output_tokens", t.rejected_output}};
  if (r.disaggregated) {
    // D may reject a request (it could never fit there) before any prefill instance sees it.
    uint64_t failed = r.front_end.failed, rejected = r.front_end.rejected;
    out["failed"] = failed;
    out["rejected"] = rejected;
    out["unfinished"] = s.requests.size() - t.finished - rejected - failed;
  }
  return out;
}

json hit_ratio_section(const request_tally& t) {
  json by_tier = json::object();
  for (tier k : all_tiers)
    by_tier[to_string(k)] = {{"blocks", ratio(at(t.tier_blocks, k), t.blocks)},
                             {"tokens", ratio(at(t.tier_tokens, k), t.input)}};
  return {{"blocks", ratio(t.hit_blocks, t.blocks)}, {"tokens", ratio(t.hit_tokens, t.input)},
          {"by_tier", by_tier}};
}

json hits_section(const request_tally& t) {
  json blocks = json::object(), tokens = json::object();
  for (tier k : all_tiers) {
    blocks[to_string(k)] = at(t.tier_blocks, k);
    tokens[to_string(k)] = at(t.tier_tokens, k);
  }
  return {{"blocks", blocks}, {"tokens", tokens}};
}

json readmission_hits_section(const request_tally& t) {
  return {{"requests", t.readmitted}, {"blocks", t.readmission_blocks},
          {"tokens", t.readmission_tokens}};
}

json latency_section(const request_tally& t) {
  return {{"ttft", distribution(t.ttft)}, {"tpot", distribution(t.tpot)},
          {"e2e", distribution(t.e2e)}, {"queue", distribution(t.queue)}};
}

json throughput_section(const request_tally& t) {
  double makespan = t.makespan_s();
  auto per_s = [&](double v) { return round6(makespan > 0 ? v / makespan : 0); };
  return {{"makespan_s", round6(makespan)},
          {"requests_per_s", per_s(static_cast<double>(t.finished))},
          {"input_tokens_per_s", per_s(static_cast<double>(t.input))},
          {"output_tokens_per_s", per_s(static_cast<double>(t.output))}};
}

}  // namespace kvtier
