// notify.mjs - an agent host sending COUNT notifications through
// `outbox-producer mcp` with the official SDK client: one send_notification
// per call (payload {"n": i}); prints "RESULT " + JSON of each call's
// observation. Used by tests/integration/test_chain.c.
//
// usage: node notify.mjs PRODUCER_BIN URL RUN_ID TOPIC COUNT
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, url, run, topic, count] = process.argv.slice(2);
if (!bin || !url || !run || !topic || !(Number(count) > 0)) {
  console.error("usage: node notify.mjs PRODUCER_BIN URL RUN_ID TOPIC COUNT");
  process.exit(2);
}
const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--url", url, "--run-id", run, "--log-level", "warn"],
  stderr: "inherit",
});
const client = new Client({ name: "outbox-chain-host", version: "1.0.0" });
await client.connect(transport);
const results = [];
for (let i = 0; i < Number(count); i++) {
  const r = await client.callTool({
    name: "send_notification",
    arguments: { topic, payload: { n: i, via: "mcp" } },
  });
  results.push(r.structuredContent);
}
await client.close();
console.log("RESULT " + JSON.stringify(results));
