// sdk_client.mjs - the official MCP SDK client (@modelcontextprotocol/sdk,
// pinned in package.json) driving `outbox-producer mcp` over stdio, as an
// agent host would: initialize, tools/list, then the calls of
// tests/integration/test_mcp_sdk.c. Prints ONE line, "RESULT " + JSON of
// everything the server answered; the C test makes the assertions.
//
// usage: node sdk_client.mjs PRODUCER_BIN URL RUN_ID [TOKEN_FILE]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, url, run, tokenFile] = process.argv.slice(2);
if (!bin || !url || !run) {
  console.error("usage: node sdk_client.mjs PRODUCER_BIN URL RUN_ID [TOKEN_FILE]");
  process.exit(2);
}

const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--url", url, "--run-id", run, "--log-level", "warn",
         ...(tokenFile ? ["--api-token-file", tokenFile] : [])],
  stderr: "inherit",
});
const client = new Client({ name: "outbox-test-host", version: "1.0.0" });
await client.connect(transport);

const report = { title: "Login fails on Safari", module: "auth", severity: "high" };
const out = { server: client.getServerVersion() };
out.tools = (await client.listTools()).tools;
// The first call meets the producer's --fault-lose-response: the report
// is created, the answer lost; the client retries with the same key.
out.first = await client.callTool({ name: "submit_bug_report", arguments: report });
// The host retries the same call (other member order): the same key.
out.again = await client.callTool({
  name: "submit_bug_report",
  arguments: { severity: "high", module: "auth", title: "Login fails on Safari" },
});
// A notification: its lost response retried under the server-made key
// (the producer loses the second creating request's response too), the
// host's retry answered from the first result, the lookup without a kind
// finds it.
const note = { topic: "notify.chat", payload: { channel: "#ops", text: "deploy done" } };
out.note = await client.callTool({ name: "send_notification", arguments: note });
out.noteAgain = await client.callTool({
  name: "send_notification",
  arguments: { payload: { text: "deploy done", channel: "#ops" }, topic: "notify.chat" },
});
out.noteLookup = await client.callTool({
  name: "lookup_by_key",
  arguments: { idempotency_key: out.note.structuredContent.metadata.idempotencyKey },
});
out.noteBad = await client.callTool({
  name: "send_notification",
  arguments: { topic: "notify.chat", payload: "text" },
});
// A new call: a new key, a new report.
out.other = await client.callTool({
  name: "submit_bug_report",
  arguments: { title: "Logout fails", module: "auth" },
});
// The host's own key wins over the derived one.
out.hostKey = await client.callTool({
  name: "submit_bug_report",
  arguments: report,
  _meta: { idempotency_key: "host-key-0001" },
});
// SEP-3182: the host's key as params.idempotencyKey (the capability is
// read from the raw initialize answer by the C test: the SDK's parser drops
// capabilities it does not know); the same key again replays, with other arguments it is the
// conflict the HTTP API answers 422; with a _meta key naming another key
// the call is refused.
out.sep = await client.callTool({
  name: "submit_bug_report", arguments: report, idempotencyKey: "sep-key-0001",
});
out.sepAgain = await client.callTool({
  name: "submit_bug_report", arguments: report, idempotencyKey: "sep-key-0001",
});
out.sepConflict = await client.callTool({
  name: "submit_bug_report",
  arguments: { ...report, title: "Login fails on Safari 17" },
  idempotencyKey: "sep-key-0001",
});
try {
  await client.callTool({
    name: "submit_bug_report", arguments: report, idempotencyKey: "sep-key-0002",
    _meta: { idempotency_key: "host-key-0002" },
  });
  out.sepTwoKeys = "answered";
} catch (e) {
  out.sepTwoKeys = { code: e.code, message: e.message };
}
out.lookup = await client.callTool({
  name: "lookup_by_key",
  arguments: { idempotency_key: out.first.structuredContent.metadata.idempotencyKey },
});
out.missing = await client.callTool({
  name: "lookup_by_key",
  arguments: { idempotency_key: "never-used-key" },
});
out.badArgs = await client.callTool({
  name: "submit_bug_report",
  arguments: { title: "x", module: "auth", colour: "red" },
});
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
  out.unknownTool = "answered";
} catch (e) {
  out.unknownTool = { code: e.code, message: e.message };
}
await client.close();
console.log("RESULT " + JSON.stringify(out));
