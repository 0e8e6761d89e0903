#include "serve/server/observe/serve_metrics.hpp"

#include <chrono>

#include "core/tier.hpp"
#include "model/messages/report_sum.hpp"
#include "model/cache/radix_tree.hpp"
#include "observe/events/event_publisher.hpp"
#include "observe/metrics/build_info_metric.hpp"
#include "observe/metrics/metrics_http.hpp"
#include "observe/metrics/metrics_registry.hpp"
#include "serve/wire/call.hpp"

namespace kvtier {

namespace {

// Counts calls as the server answers them; runs on the answering server actor's thread (several
// at once with a stack per engine: every count is an atomic add).
class call_metrics final : public serve::serve_observer {
 public:
  explicit call_metrics(std::shared_ptr<metrics_registry> r) : registry_(std::move(r)) {
    auto& r_ = *registry_;
    const auto buckets = exponential_buckets(1e-5, 2, 20);  // 10 us .. 5.2 s
    for (int i = 0; i < serve::verb_count; ++i) {
      std::string v = serve::verb_name(static_cast<serve::verb>(i));
      calls_[i] = &r_.add_counter("kvtier_calls_total", "Protocol calls answered, per verb.",
                                  {{"verb", v}});
      latency_[i] = &r_.add_histogram(
        "kvtier_call_duration_seconds",
        "Time from a call's arrival at the server actor to its reply, per verb.", buckets,
        {{"verb", v}});
    }
    for (int i = 0; i < serve::error_kind_count; ++i)
      errors_[i] = &r_.add_counter(
        "kvtier_errors_total", "Calls answered with an error, per kind (docs/protocol.md).",
        {{"kind", serve::error_name(static_cast<serve::error_kind>(i))}});
    engines_ = &r_.add_gauge("kvtier_engines", "Engines registered now.");
    released_ = &r_.add_counter("kvtier_engine_requests_released_total",
                                "Live requests released because their engine left.");
    for (int s = 0; s < 2; ++s) {
      const char* source = s == 0 ? "lookup" : "admit";
      for (tier t : all_tiers) {
        metric_labels l = {{"tier", to_string(t)}, {"source", source}};
        at(asked_[s], t) = &r_.add_counter(
          "kvtier_lookup_blocks_total",
          "Prompt blocks asked of each tier: all of them of the device, those after the "
          "device's prefix of the host, those after both of storage.", l);
        at(hits_[s], t) = &r_.add_counter("kvtier_hit_blocks_total",
                                      "Prompt blocks each tier held (a contiguous prefix).", l);
      }
    }
  }

  void on_call(serve::verb v, int64_t latency_ns, std::optional<serve::error_kind> err) override {
    auto i = static_cast<int>(v);
    calls_[i]->inc();
    latency_[i]->observe(static_cast<double>(latency_ns) * 1e-9);
    if (err)
      errors_[static_cast<int>(*err)]->inc();
  }

  void on_refused(serve::error_kind err) override { errors_[static_cast<int>(err)]->inc(); }

  void on_engine(uint64_t, const std::string&, bool registered, uint64_t released) override {
    engines_->add(registered ? 1 : -1);
    released_->inc(static_cast<double>(released));
  }

  void on_hits(serve::verb v, uint32_t prompt_blocks, uint32_t device, uint32_t host,
               uint32_t storage) override {
    int s = v == serve::verb::lookup ? 0 : 1;
    const per_tier<uint32_t> held = {device, host, storage};
    uint32_t left = prompt_blocks;
    for (tier t : all_tiers) {
      at(asked_[s], t)->inc(left);
      at(hits_[s], t)->inc(at(held, t));
      left = left > at(held, t) ? left - at(held, t) : 0;
    }
  }

 private:
  std::shared_ptr<metrics_registry> registry_;  // keeps the series alive
  counter* calls_[serve::verb_count] = {};
  histogram* latency_[serve::verb_count] = {};
  counter* errors_[serve::error_kind_count] = {};
  gauge* engines_ = nullptr;
  counter* released_ = nullptr;
  per_tier<counter*> asked_[2] = {};  // by source: lookup, admit
  per_tier<counter*> hits_[2] = {};
};

// Reads the actors' reports when scraped (on the endpoint's thread).
void add_actor_collector(metrics_registry& r, const serve_metrics_sources& src) {
  per_tier<gauge*> capacity{}, used{};
  per_tier<counter*> evictions{};
  for (tier t : all_tiers) {
    metric_labels l = {{"tier", to_string(t)}};
    at(capacity, t) =
      &r.add_gauge("kvtier_tier_capacity_blocks", "Blocks each tier holds at most.", l);
    at(used, t) = &r.add_gauge("kvtier_tier_used_blocks",
                               "Blocks in use in each tier (storage: blocks stored).", l);
    at(evictions, t) =
      &r.add_counter("kvtier_evictions_total", "Blocks evicted from each tier.", l);
  }
  at(capacity, tier::device)->set(static_cast<double>(src.device_blocks));
  at(capacity, tier::host)->set(static_cast<double>(src.host_blocks));
  gauge* in_flight = &r.add_gauge("kvtier_copies_in_flight",
                                  "Block copies the controller issued that have not finished.");
  gauge* scrape_errors = &r.add_gauge(
    "kvtier_scrape_report_errors", "Actor reports that failed or timed out at the last scrape.");
  metrics_registry* registry = &r;
  serve_metrics_sources s = src;
  r.add_collector([=] {
    caf::scoped_actor self{*s.system};
    const auto timeout = std::chrono::seconds(5);
    int failed = 0;
    auto on_error = [&](const caf::error&) { ++failed; };
    controller_report c;
    for (const cache_controller_actor& controller : s.controllers)
      self->request(controller, timeout, report_atom_v)
        .receive([&](const controller_report& one) { c += one; }, on_error);
    at(used, tier::device)->set(c.device_used);
    at(used, tier::host)->set(c.host_used);
    at(evictions, tier::device)->set_total(static_cast<double>(c.device_evictions));
    at(evictions, tier::host)->set_total(static_cast<double>(c.host_evictions));
    in_flight->set(static_cast<double>(c.copies_in_flight));
    auto links = [&](const std::vector<link_report>& ls) {
      for (const link_report& l : ls) {
        registry->add_counter("kvtier_link_bytes_total", "Bytes moved over each link.",
                              {{"link", l.name}})
          .set_total(static_cast<double>(l.bytes));
        registry->add_counter("kvtier_link_busy_seconds_total",
                              "Time each link spent moving bytes.", {{"link", l.name}})
          .set_total(static_cast<double>(l.busy_ns) * 1e-9);
      }
    };
    engine_report e;
    for (const transfer_engine_actor& engine : s.engines)
      self->request(engine, timeout, report_atom_v)
        .receive([&](const engine_report& one) { e += one; }, on_error);
    links(e.links);
    self->request(s.storage, timeout, report_atom_v)
      .receive(
        [&](const storage_report& st) {
          at(capacity, tier::storage)->set(static_cast<double>(st.capacity));
          at(used, tier::storage)->set(static_cast<double>(st.stored));
          at(evictions, tier::storage)->set_total(static_cast<double>(st.evictions));
          links(st.nodes);
        },
        on_error);
    scrape_errors->set(failed);
  });
}

void add_event_collector(metrics_registry& r, event_publisher* events) {
  if (!events)
    return;
  counter* batches = &r.add_counter("kvtier_events_batches_total", "KV event batches published.");
  counter* count = &r.add_counter("kvtier_events_total", "KV events in the published batches.");
  counter* replayed = &r.add_counter("kvtier_events_replayed_batches_total",
                                     "Batches resent through the replay socket.");
  counter* bad = &r.add_counter("kvtier_events_bad_replay_requests_total",
                                "Malformed replay requests.");
  r.add_collector([=] {
    event_publisher_stats s = events->stats();
    batches->set_total(static_cast<double>(s.batches));
    count->set_total(static_cast<double>(s.events));
    replayed->set_total(static_cast<double>(s.replayed_batches));
    bad->set_total(static_cast<double>(s.bad_replay_requests));
  });
}

}  // namespace

serve_metrics::serve_metrics(const serve_metrics_options& options,
                             const serve_metrics_sources& sources)
  : registry_(std::make_shared<metrics_registry>()), host_(options.host) {
  observer_ = std::make_shared<call_metrics>(registry_);
  add_build_info_metric(*registry_);
  add_actor_collector(*registry_, sources);
  add_event_collector(*registry_, sources.events);
  http_ = std::make_unique<metrics_http>(*registry_, options.host,
                                         static_cast<uint16_t>(options.port));
}

serve_metrics::~serve_metrics() = default;

void serve_metrics::count_refused_connections(
  std::shared_ptr<const std::atomic<uint64_t>> refused) {
  counter* c = &registry_->add_counter(
    "kvtier_refused_connections_total",
    "Connections refused at the handshake (CURVE: plaintext, another server key, an unlisted "
    "client key).");
  registry_->add_collector([c, refused] { c->set_total(static_cast<double>(refused->load())); });
}

uint16_t serve_metrics::port() const {
  return http_->port();
}

std::string serve_metrics::ready_line() const {
  return "kvtier serve: metrics on http://" + host_ + ":" + std::to_string(port()) + "/metrics";
}

}  // namespace kvtier
