// elicit.mjs - the official MCP SDK client as a host that can ask its user
// (the elicitation capability) driving `outbox-producer mcp --replay ask
// --ledger FILE`: two calls whose keys the ledger left uncertain and the
// lookup does not find; the server asks before posting each again. The
// "user" approves the first key and declines the second. Prints ONE line,
// "RESULT " + JSON; tests/integration/test_mcp_sdk.c makes the assertions.
//
// usage: node elicit.mjs PRODUCER_BIN URL RUN_ID LEDGER
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, url, run, ledger] = process.argv.slice(2);
if (!bin || !url || !run || !ledger) {
  console.error("usage: node elicit.mjs PRODUCER_BIN URL RUN_ID LEDGER");
  process.exit(2);
}
const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--url", url, "--run-id", run, "--replay", "ask", "--ledger", ledger,
         "--log-level", "warn"],
  stderr: "inherit",
});
const client = new Client({ name: "outbox-test-host", version: "1.0.0" },
  { capabilities: { elicitation: {} } });
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  const approve = req.params.message.includes("ask-key-0001");
  return approve ? { action: "accept", content: { confirm: true } } : { action: "decline" };
});
await client.connect(transport);
const note = { topic: "notify.chat", payload: { text: "asked first" } };
const out = {};
out.approved = await client.callTool({
  name: "send_notification", arguments: note, idempotencyKey: "ask-key-0001",
});
out.declined = await client.callTool({
  name: "send_notification", arguments: { ...note, payload: { text: "declined" } },
  idempotencyKey: "ask-key-0002",
});
out.asked = asked;
await client.close();
console.log("RESULT " + JSON.stringify(out));
