#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <httplib.h>

#include "observe/metrics/build_info_metric.hpp"
#include "observe/metrics/metrics_http.hpp"
#include "observe/metrics/metrics_registry.hpp"

using namespace kvtier;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

// Checks the exposition format's grammar line by line: comments are HELP or TYPE of a valid name,
// samples are `name{labels} value` with quoted, escaped label values and a number; every sample
// belongs to the family whose TYPE came last. Returns the number of samples.
size_t check_exposition(const std::string& text) {
  REQUIRE(!text.empty());
  REQUIRE(text.back() == '\n');
  std::string family;
  std::string type;
  size_t samples = 0;
  for (const std::string& line : lines_of(text)) {
    INFO(line);
    REQUIRE(!line.empty());
    if (line[0] == '#') {
      std::istringstream in(line);
      std::string hash, kind, name;
      in >> hash >> kind >> name;
      REQUIRE((kind == "HELP" || kind == "TYPE"));
      REQUIRE(valid_metric_name(name));
      if (kind == "TYPE") {
        in >> type;
        REQUIRE((type == "counter" || type == "gauge" || type == "histogram"));
        family = name;
      }
      continue;
    }
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ')
      ++i;
    std::string name = line.substr(0, i);
    REQUIRE(valid_metric_name(name));
    if (type == "histogram") {
      bool suffixed = name == family + "_bucket" || name == family + "_sum"
                      || name == family + "_count";
      REQUIRE(suffixed);
    } else {
      REQUIRE(name == family);
    }
    if (line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        size_t eq = line.find('=', i);
        REQUIRE(eq != std::string::npos);
        REQUIRE(valid_label_name(line.substr(i, eq - i)));
        REQUIRE(line[eq + 1] == '"');
        size_t j = eq + 2;
        for (; line[j] != '"'; ++j) {
          REQUIRE(j < line.size());
          if (line[j] == '\\') {
            ++j;
            REQUIRE((line[j] == '\\' || line[j] == '"' || line[j] == 'n'));
          }
        }
        i = j + 1;
        if (line[i] == ',')
          ++i;
      }
      ++i;
    }
    REQUIRE(line[i] == ' ');
    std::string value = line.substr(i + 1);
    if (value != "+Inf" && value != "-Inf" && value != "NaN") {
      size_t used = 0;
      std::stod(value, &used);
      REQUIRE(used == value.size());
    }
    ++samples;
  }
  return samples;
}

}  // namespace

TEST_CASE("metrics: counters, gauges and labels render in the text format", "[metrics]") {
  metrics_registry r;
  r.add_counter("kvtier_hit_blocks_total", "Blocks found", {{"tier", "device"}}).inc(3);
  r.add_counter("kvtier_hit_blocks_total", "Blocks found", {{"tier", "host"}}).inc();
  r.add_counter("kvtier_hit_blocks_total", "Blocks found", {{"tier", "device"}}).inc(2);
  r.add_gauge("kvtier_tier_used_blocks", "Used", {{"tier", "host"}}).set(1.5);
  std::string text = r.render();
  CHECK(check_exposition(text) == 3);
  CHECK(text == "# HELP kvtier_hit_blocks_total Blocks found\n"
                "# TYPE kvtier_hit_blocks_total counter\n"
                "kvtier_hit_blocks_total{tier=\"device\"} 5\n"
                "kvtier_hit_blocks_total{tier=\"host\"} 1\n"
                "# HELP kvtier_tier_used_blocks Used\n"
                "# TYPE kvtier_tier_used_blocks gauge\n"
                "kvtier_tier_used_blocks{tier=\"host\"} 1.5\n");
  CHECK_THROWS_AS(r.add_counter("kvtier_x_total", "", {}).inc(-1), std::invalid_argument);
}

TEST_CASE("metrics: histogram buckets are cumulative and end with +Inf", "[metrics]") {
  metrics_registry r;
  histogram& h = r.add_histogram("kvtier_request_duration_seconds", "Latency", {0.001, 0.01, 0.1},
                                 {{"verb", "lookup"}});
  for (double v : {0.0005, 0.001, 0.002, 0.05, 0.05, 7.0})
    h.observe(v);
  CHECK(h.cumulative_counts() == std::vector<uint64_t>{2, 3, 5, 6});
  std::string text = r.render();
  CHECK(check_exposition(text) == 6);
  CHECK(text.find("kvtier_request_duration_seconds_bucket{verb=\"lookup\",le=\"0.001\"} 2\n")
        != std::string::npos);
  CHECK(text.find("_bucket{verb=\"lookup\",le=\"0.01\"} 3\n") != std::string::npos);
  CHECK(text.find("_bucket{verb=\"lookup\",le=\"0.1\"} 5\n") != std::string::npos);
  CHECK(text.find("_bucket{verb=\"lookup\",le=\"+Inf\"} 6\n") != std::string::npos);
  CHECK(text.find("kvtier_request_duration_seconds_count{verb=\"lookup\"} 6\n")
        != std::string::npos);
  CHECK(text.find("kvtier_request_duration_seconds_sum{verb=\"lookup\"} 7.1035\n")
        != std::string::npos);
  // Cumulative means never decreasing, whatever the order of observations.
  histogram& g = r.add_histogram("kvtier_other_seconds", "x", exponential_buckets(1e-5, 4, 8));
  for (int i = 0; i < 1000; ++i)
    g.observe((i * 7919 % 1000) * 1e-4);
  auto c = g.cumulative_counts();
  for (size_t i = 1; i < c.size(); ++i)
    CHECK(c[i] >= c[i - 1]);
  CHECK(c.back() == 1000);
  CHECK_THROWS_AS(histogram({0.1, 0.1}), std::invalid_argument);
  CHECK_THROWS_AS(histogram({1, 0.5}), std::invalid_argument);
  CHECK_THROWS_AS(r.add_histogram("kvtier_bad", "x", {1}, {{"le", "1"}}), std::invalid_argument);
}

TEST_CASE("metrics: label values and help are escaped, and bad names are refused", "[metrics]") {
  CHECK(escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  CHECK(escape_help("line\\one\ntwo \"q\"") == "line\\\\one\\ntwo \"q\"");
  metrics_registry r;
  r.add_counter("kvtier_errors_total", "Errors by kind.\nSecond line", {{"kind", "bad \"msg\"\n"}})
    .inc();
  std::string text = r.render();
  CHECK(check_exposition(text) == 1);
  CHECK(text.find("# HELP kvtier_errors_total Errors by kind.\\nSecond line\n") != std::string::npos);
  CHECK(text.find("kvtier_errors_total{kind=\"bad \\\"msg\\\"\\n\"} 1\n") != std::string::npos);
  CHECK(valid_metric_name("kvtier_a_b1"));
  CHECK_FALSE(valid_metric_name("kvtier:a_b1"));  // ':' is for recording rules
  CHECK_FALSE(valid_metric_name("1abc"));
  CHECK_FALSE(valid_metric_name("a-b"));
  CHECK_FALSE(valid_metric_name(""));
  CHECK(valid_label_name("tier"));
  CHECK_FALSE(valid_label_name("__x"));
  CHECK_FALSE(valid_label_name("a:b"));
  CHECK_THROWS_AS(r.add_counter("kvtier bad", "x"), std::invalid_argument);
  CHECK_THROWS_AS(r.add_gauge("kvtier_errors_total", "x"), std::invalid_argument);  // type clash
  CHECK_THROWS_AS(r.add_counter("kvtier_c_total", "x", {{"a", "1"}, {"a", "2"}}),
                  std::invalid_argument);
  CHECK(format_sample_value(1.0 / 0.0) == "+Inf");
  CHECK(format_sample_value(-1.0 / 0.0) == "-Inf");
  CHECK(format_sample_value(0.0 / 0.0) == "NaN");
  CHECK(format_sample_value(42) == "42");
  CHECK(format_sample_value(0.1) == "0.1");
}

TEST_CASE("metrics: collectors run at each render, and updates from many threads add up",
          "[metrics]") {
  metrics_registry r;
  gauge& used = r.add_gauge("kvtier_tier_used_blocks", "Used", {{"tier", "device"}});
  int scrapes = 0;
  r.add_collector([&] { used.set(++scrapes * 10); });
  counter& c = r.add_counter("kvtier_lookups_total", "Lookups");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i)
        c.inc();
    });
  for (auto& t : threads)
    t.join();
  CHECK(c.value() == 40000);
  CHECK(r.render().find("kvtier_tier_used_blocks{tier=\"device\"} 10\n") != std::string::npos);
  CHECK(r.render().find("kvtier_tier_used_blocks{tier=\"device\"} 20\n") != std::string::npos);
}

TEST_CASE("metrics: GET /metrics over HTTP on a free loopback port", "[metrics][http]") {
  metrics_registry r;
  r.add_counter("kvtier_errors_total", "Errors", {{"kind", "malformed"}}).inc(2);
  metrics_http server(r, "127.0.0.1", 0);
  REQUIRE(server.port() > 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(5);
  auto res = client.Get("/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type") == metrics_content_type);
  CHECK(res->body.find("kvtier_errors_total{kind=\"malformed\"} 2\n") != std::string::npos);
  CHECK(check_exposition(res->body) == 1);
  auto missing = client.Get("/nothing");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  // The port is taken now: a second server on it fails and names the address.
  REQUIRE_THROWS_WITH(metrics_http(r, "127.0.0.1", server.port()),
                      Catch::Contains("127.0.0.1:" + std::to_string(server.port())));
}

TEST_CASE("metrics: a collector may register series it learns of at scrape time", "[metrics]") {
  metrics_registry r;
  int scrapes = 0;
  r.add_collector([&] {
    ++scrapes;
    r.add_counter("kvtier_link_bytes_total", "Bytes", {{"link", "link" + std::to_string(scrapes)}})
      .set_total(scrapes * 100);
  });
  r.render();
  std::string text = r.render();
  CHECK(check_exposition(text) == 2);
  CHECK(text.find("kvtier_link_bytes_total{link=\"link1\"} 100\n") != std::string::npos);
  CHECK(text.find("kvtier_link_bytes_total{link=\"link2\"} 200\n") != std::string::npos);
}

TEST_CASE("metrics: kvtier_build_info is 1 with the build in its labels", "[metrics]") {
  metrics_registry r;
  build_info b{"1.2.3", "abc-dirty", "Release", "GNU 12.2.0", "none"};
  add_build_info_metric(r, b);
  CHECK(r.render().find("kvtier_build_info{version=\"1.2.3\",commit=\"abc-dirty\","
                        "build_type=\"Release\",compiler=\"GNU 12.2.0\",cuda=\"none\"} 1\n")
        != std::string::npos);
}
