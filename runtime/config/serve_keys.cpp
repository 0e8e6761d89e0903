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
     "kvtier serve --events: the topic frame of every KV event message (docs/events.md)"},
    {keys::serve::events_buffer, 1, 10000000, {}, false,
     "kvtier serve --events: KV event batches the replay socket keeps for subscribers that "
     "missed them"},
    {keys::serve::events_hwm, 1, 100000000, {}, false,
     "kvtier serve --events: messages the PUB socket queues per subscriber before dropping"},
    {keys::serve::events_layout, 0, 0, {"array", "map"}, false,
     "kvtier serve --events: vLLM's positional EventBatch layout (array, what llm-d and Dynamo "
     "read) or its map layout (docs/events.md)"},
    {keys::serve::lookups, 0, 0, {"actor", "published"}, false,
     "kvtier serve: where lookups are answered: actor (all on the server actor) or published "
     "(off it, from the blocks the controller publishes, when safe; docs/protocol.md, "
     "\"lookup\")"},
  };
}

}  // namespace kvtier
