#include "model/scheduler/batch_planner.hpp"

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "core/tier.hpp"

namespace kvtier {

uint32_t output_reserve::blocks() const {
  double v = std::max(std::floor(value_), static_cast<double>(options_.reserve_min));
  return v > 0 ? static_cast<uint32_t>(v) : 0;
}

void plan_running(request_book& book, const scheduler_options& o, step_plan& plan) {
  plan.items.clear();
  plan.need_blocks = 0;
  plan.grows.clear();
  plan.admits.clear();
  plan.preempted.clear();
  plan.items.reserve(book.running.size() + o.probe_limit);
  uint32_t budget = o.token_budget;
  for (request_id id : book.running) {
    live_request& r = book.at(id);
    KVTIER_ASSERT(r.computed < r.target());
    if (budget == 0)
      break;
    uint64_t left = r.target() - r.computed;
    auto tokens = static_cast<uint32_t>(std::min<uint64_t>(left, budget));
    uint32_t have = r.covered_blocks;
    uint32_t want = r.layout.blocks_for(r.computed + tokens);
    work_item w{id, r.computed, tokens, want > have ? want - have : 0, false, &r};
    plan.need_blocks += w.need_blocks;
    budget -= tokens;
    plan.items.push_back(w);
  }
  plan.budget_left = budget;
}

bool needs_probe(const request_book& book, const scheduler_options& o, const step_plan& plan,
                 uint32_t known_available, uint32_t reserve_blocks, probe& out) {
  out.candidates.clear();
  out.victims.clear();
  out.grow_blocks = plan.need_blocks;
  size_t seats = book.running.size() < o.max_num_seqs ? o.max_num_seqs - book.running.size() : 0;
  // Match only the candidates that could share this step's token budget: stop once the tokens
  // they would compute (as last probed, else their whole prompt) cover it. Matching the rest of
  // a long queue every step would be wasted work.
  // A head that did not fit at its last probe cannot fit before more blocks are available (FCFS:
  // nobody behind it may pass), so it is not matched again until then.
  if (!book.waiting.empty()) {
    const live_request& head = book.at(book.waiting.front());
    size_t running = book.running.size();
    if (head.blocks_hint > 0
        && head.blocks_hint + uint64_t{running} * reserve_blocks + plan.need_blocks > known_available)
      seats = 0;
  }
  uint64_t covered = 0;
  for (request_id id : book.waiting) {
    if (plan.budget_left == 0 || out.candidates.size() >= std::min(seats, size_t{o.probe_limit})
        || covered >= plan.budget_left)
      break;
    const live_request& r = book.at(id);
    if (r.refetching)
      break;  // its storage lookup is under way; nobody behind it may pass (FCFS)
    out.candidates.push_back(id);
    covered += r.uncached_hint > 0 ? r.uncached_hint : r.target() - r.computed;
  }
  bool short_of_blocks = plan.need_blocks > known_available;
  if (short_of_blocks)
    out.victims.assign(book.running.rbegin(), book.running.rend());
  return !out.candidates.empty() || short_of_blocks;
}

namespace {

const candidate_match* find_match(const probe_reply* reply, request_id id) {
  if (!reply)
    return nullptr;
  for (const auto& m : reply->matches)
    if (m.req == id)
      return &m;
  return nullptr;
}

// Cached tokens a request may skip: its hits, but a full hit recomputes its last block.
uint64_t skippable(const live_request& r, uint32_t hit_blocks, uint64_t hit_tokens) {
  if (hit_blocks > 0 && hit_tokens >= r.target())
    return r.target() - r.layout.tokens_of(hit_blocks - 1);
  return hit_tokens;
}

// Available blocks an admission takes beyond its fresh ones: the idle device hits it starts to
// hold (as many as it may use; when the step covers fewer blocks, the count is an upper bound).
uint32_t held_hits(const candidate_match& m, uint32_t blocks) {
  return std::min(m.idle_device_blocks, std::min(blocks, m.device_blocks));
}

// An admission's step computes at least the token before `until`, so the block holding it is
// computed, not a hit (a full hit's last block, skippable; or hits that grew past the plan
// between probe and grant): the hits stop before it, so that hits and computed tokens add up to
// the prompt (docs/design.md, "Hit ratio"). Returns the tokens the hits skip.
uint64_t keep_hits_below(const live_request& r, uint64_t until, request_record& rec) {
  uint32_t blocks = 0;
  uint64_t tokens = 0;
  for (tier t : all_tiers) {
    blocks += at(rec.hit_blocks, t);
    tokens += at(rec.hit_tokens, t);
  }
  const uint32_t recomputed_from = r.layout.blocks_for(until) - 1;
  // The last hit blocks sit in the last tiers that have hits (device, then host, then storage).
  for (tier t : {tier::storage, tier::host, tier::device}) {
    while (blocks > recomputed_from && at(rec.hit_blocks, t) > 0) {
      --blocks;
      at(rec.hit_blocks, t) -= 1;
      at(rec.hit_tokens, t) -= r.layout.tokens_of(blocks);
      tokens -= r.layout.tokens_of(blocks);
    }
  }
  return tokens;
}

}  // namespace

void plan_rest(request_book& book, const scheduler_options& o, const output_reserve& reserve,
               uint32_t available, const probe_reply* reply, step_plan& plan) {
  uint64_t avail = available;
  // 2. Preempt from the back until the running requests' blocks fit.
  if (plan.need_blocks > avail) {
    for (size_t k = 0; k < book.running.size() && plan.need_blocks > avail; ++k) {
      request_id victim = book.running[book.running.size() - 1 - k];
      if (reply && k < reply->victim_frees.size())
        avail += reply->victim_frees[k];
      auto it = std::find_if(plan.items.begin(), plan.items.end(),
                             [&](const work_item& w) { return w.req == victim; });
      if (it != plan.items.end()) {
        plan.need_blocks -= it->need_blocks;
        plan.budget_left += it->tokens;
        plan.items.erase(it);
      }
      plan.preempted.push_back(victim);
    }
  }
  for (const work_item& w : plan.items)
    if (w.need_blocks > 0)
      plan.grows.push_back({w.req, static_cast<uint32_t>(w.start + w.tokens)});
  avail = avail > plan.need_blocks ? avail - plan.need_blocks : 0;
  // 3. Admit first come first served, only in a step without preemption.
  if (!plan.preempted.empty())
    return;
  size_t running = book.running.size();
  uint32_t budget = plan.budget_left;
  for (request_id id : book.waiting) {
    if (running >= o.max_num_seqs || budget == 0)
      break;
    const candidate_match* m = find_match(reply, id);
    if (!m)
      break;  // not probed this step
    live_request& r = book.at(id);
    if (r.refetching)
      break;  // waits for its storage lookup, at the head of the queue
    uint64_t cached = skippable(r, m->device_blocks + m->host_blocks,
                                m->device_tokens + m->host_tokens);
    auto tokens = static_cast<uint32_t>(std::min<uint64_t>(r.target() - cached, budget));
    uint64_t until = cached + tokens;
    uint32_t blocks = r.layout.blocks_for(until);
    uint32_t fresh = blocks > m->device_blocks ? blocks - m->device_blocks : 0;
    uint32_t taken = fresh + held_hits(*m, blocks);
    uint64_t threshold = taken + uint64_t{running} * reserve.blocks();
    if (threshold > avail)
      break;
    plan.admits.push_back({id, static_cast<uint32_t>(until)});
    plan.items.push_back({id, cached, tokens, fresh, true, &r});
    avail -= taken;
    budget -= tokens;
    ++running;
  }
  plan.budget_left = budget;
}

void note_matches(request_book& book, const probe_reply& reply, uint32_t budget) {
  for (const candidate_match& m : reply.matches) {
    live_request& r = book.at(m.req);
    uint64_t cached = skippable(r, m.device_blocks + m.host_blocks, m.device_tokens + m.host_tokens);
    r.uncached_hint = std::max<uint64_t>(r.target() - cached, 1);
    uint64_t until = cached + std::min<uint64_t>(r.uncached_hint, budget);
    uint32_t blocks = r.layout.blocks_for(until);
    uint32_t fresh = blocks > m.device_blocks ? blocks - m.device_blocks : 0;
    r.blocks_hint = std::max<uint32_t>(fresh + held_hits(m, blocks), 1);
  }
}

void apply_grant(request_book& book, const scheduler_options& o, const step_plan& plan,
                 const grant& g, int64_t now, std::vector<work_item>& items) {
  items.clear();
  items.reserve(plan.items.size());
  // Preempted requests wait again at the front, in their admission order.
  for (auto it = plan.preempted.rbegin(); it != plan.preempted.rend(); ++it) {
    live_request& r = book.at(*it);
    if (o.preemption != preemption_mode::recompute) {
      // The controller named its full generated blocks and saved them: list them the same way
      // (the controller caps them at the blocks it held, which are covered_blocks).
      uint32_t named = saved_private_blocks(r.layout, r.computed, o.block_size);
      named = r.covered_blocks > r.layout.listed()
                ? std::min(named, r.covered_blocks - r.layout.listed()) : 0;
      r.layout.list_private_blocks(named);
      r.saved_blocks = r.layout.complete_within(r.computed);
      r.refetch_due = o.preemption == preemption_mode::save_to_storage && r.saved_blocks > 0;
    }
    r.running = false;
    r.computed = 0;
    r.covered_blocks = 0;
    ++r.record.preemptions;
    book.running.erase(std::find(book.running.begin(), book.running.end(), *it));
    book.waiting.push_front(*it);
  }
  size_t admitted = 0;
  for (const work_item& w : plan.items) {
    live_request& r = *w.request;
    if (!w.admitted) {
      if (std::find(g.failed_grows.begin(), g.failed_grows.end(), w.req) != g.failed_grows.end())
        continue;  // no blocks this step: it waits for the next one
      r.covered_blocks = std::max(r.covered_blocks, r.layout.blocks_for(w.start + w.tokens));
      items.push_back(w);
      continue;
    }
    auto res = std::find_if(g.admits.begin(), g.admits.end(),
                            [&](const admit_result& a) { return a.req == w.req; });
    KVTIER_ASSERT(res != g.admits.end());
    if (!res->admitted)
      continue;
    KVTIER_ASSERT(!book.waiting.empty() && book.waiting[admitted] == w.req);
    ++admitted;
    uint64_t until = w.start + w.tokens;
    r.record.hit_blocks = {res->device_blocks, res->host_blocks, res->storage_blocks};
    r.record.hit_tokens = {res->device_tokens, res->host_tokens, res->storage_tokens};
    uint64_t cached = keep_hits_below(r, until, r.record);  // at least one token runs
    KVTIER_ASSERT(cached < until);
    // A re-admission may find cached what the request never reached: those prompt tokens are
    // neither first-admission hits nor ever computed (the balance of finish_step's counts).
    if (r.record.admitted_ns >= 0 && cached > r.high_water)
      r.record.late_hit_tokens += std::min<uint64_t>(cached, r.prompt)
                                  - std::min<uint64_t>(r.high_water, r.prompt);
    r.computed = cached;
    r.covered_blocks = r.layout.blocks_for(until);
    r.running = true;
    r.refetch_due = false;
    r.looked_up_again = false;
    if (r.record.admitted_ns < 0) {
      r.record.admitted_ns = now;
      r.record.first_hit_blocks = r.record.hit_blocks;
      r.record.first_hit_tokens = r.record.hit_tokens;
    }
    book.running.push_back(w.req);
    items.push_back({w.req, cached, static_cast<uint32_t>(until - cached), 0, true, &r});
  }
  book.waiting.erase(book.waiting.begin(), book.waiting.begin() + static_cast<long>(admitted));
}

step_outcome finish_step(request_book& book, const std::vector<work_item>& items, int64_t now) {
  step_outcome out;
  for (const work_item& w : items) {
    live_request& r = *w.request;
    KVTIER_ASSERT(r.computed == w.start);
    bool decode = r.decoding() && w.tokens == 1;
    (decode ? out.decode_tokens : out.prefill_tokens) += w.tokens;
    uint64_t end = w.start + w.tokens;
    uint64_t again = w.start < r.high_water ? std::min(end, r.high_water) - w.start : 0;
    out.recomputed_tokens += again;
    r.record.recomputed_tokens += again;
    // Prompt tokens, and tokens computed before: a re-admission's prefill also computes the KV
    // of the last token sampled before the preemption, which is decode work, done once
    // (docs/design.md, "Hit ratio").
    const uint64_t counted = std::max<uint64_t>(r.prompt, r.high_water);
    if (!decode && w.start < counted)
      r.record.computed_tokens += std::min(end, counted) - w.start;
    r.high_water = std::max(r.high_water, end);
    r.computed = end;
    // The controller commits listed blocks once complete: tell it only when one completed.
    if (r.layout.completes_block(w.start, end))
      out.computed.push_back({w.req, static_cast<uint32_t>(end)});
    if (end < r.target())
      continue;  // a chunk of a longer prefill
    ++r.generated;
    if (r.generated == 1)
      r.record.first_token_ns = now;
    if (r.generated < r.output)
      continue;
    r.finished = true;
    r.running = false;
    r.record.finish_ns = now;
    out.finished.push_back(w.req);
    book.running.erase(std::find(book.running.begin(), book.running.end(), w.req));
  }
  return out;
}

}  // namespace kvtier
