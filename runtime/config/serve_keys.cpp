#include "runtime/config/serve_keys.hpp"

namespace kvtier {

std::vector<option_spec> serve_key_specs() {
  return {
    {keys::serve::client_timeout_s, 0.01, 86400, {}, false,
     "kvtier serve: an engine silent this long is dropped and every request it holds released"},
    {keys::serve::max_message_bytes, 256, 1073741824.0, {}, false,
     "kvtier serve: longest call accepted, in bytes (a longer one is answered too_large "
     "undecoded)"},
    {keys::serve::events_topic, 0, 0, {}, false,
     "kvtier serve --events: the topic frame of every KV event message; {pod} is this "
     "machine's name, {model} model.name (the default, kv@{pod}@{model}, is what llm-d "
     "parses; docs/events.md)"},
    {keys::serve::events_buffer, 1, 10000000, {}, false,
     "kvtier serve --events: KV event batches the replay socket keeps for subscribers that "
     "missed them"},
    {keys::serve::events_hwm, 1, 100000000, {}, false,
     "kvtier serve --events: messages the PUB socket queues per subscriber before dropping"},
    {keys::serve::events_layout, 0, 0, {"map", "array"}, false,
     "kvtier serve --events: events as current vLLM writes them (map: tagged by \"type\", "
     "since vLLM PR #42892) or as vLLM v0.11.0 did (array: positional); docs/events.md"},
    {keys::serve::events_socket, 0, 0, {"bind", "connect"}, false,
     "kvtier serve --events: bind the PUB socket (subscribers connect) or connect it to a "
     "subscriber that binds (llm-d's binds tcp://*:5557); docs/events.md"},
    {keys::serve::lookups, 0, 0, {"actor", "published"}, false,
     "kvtier serve: where lookups are answered: actor (all on the server actor) or published "
     "(off it, from the blocks the controller publishes, when safe; docs/protocol.md, "
     "\"lookup\")"},
    {keys::serve::controller_stacks, 0, 0, {"one", "per_engine"}, false,
     "kvtier serve: one cache controller and transfer engine for every engine (one), or a "
     "stack of its own per engine slot, each with a server actor of its own and side by side "
     "on the cores, sharing the storage pool (per_engine; docs/design.md, \"Controller "
     "stacks\")"},
    {keys::serve::engine_slots, 1, 256, {}, false,
     "kvtier serve, serve.controller_stacks=per_engine: the stacks started; each engine takes "
     "the least-used one at hello (a restarted engine its old one; a connection's engines "
     "share one), and the host tier is split into this many equal shares"},
    {keys::serve::io_threads, 1, 16, {}, false,
     "kvtier serve: ZeroMQ I/O threads of the server's socket; the engines' connections are "
     "spread over them (one moves every byte at 1)"},
  };
}

}  // namespace kvtier
