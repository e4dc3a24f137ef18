// Drives hcmcp with the TypeScript SDK v1 client (@modelcontextprotocol/sdk, pinned in package.json
// beside this file), as a desktop or IDE host embeds it: tools/list first (the client then checks
// every structuredContent against the tool's outputSchema, and throws -32602 when it does not
// match), then each call of the plan. tests/test_ts_client.py runs it (issue 28).
//
//   node tool_calls.mjs SDK_FOLDER PLAN_JSON
//
// SDK_FOLDER: where `npm ci` installed package.json (.ci/node.sh: ~/.cache/hcmcp/ts-sdk-<version>).
// PLAN_JSON: {"server": {"command": [...], "env": {...}} or {"url": "http://127.0.0.1:PORT/mcp"},
//             "elicitation": false | true, "calls": [{"name", "arguments", "answer"?}]}
// A "$first" argument value is replaced by the uuid of the first check list_checks shows.
// "answer" (with "elicitation": true) is how the dialog is answered: "accept", "decline", "cancel"
// or "fail" (the handler throws, so the client answers with a JSON-RPC error).
// Prints one JSON object per line: {"listed": N} first, then per call {"name", "arguments",
// "threw": null or the thrown message, "isError", "text", "meta", "structuredContent"}.
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [folder, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const sdk = join(folder, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");
const load = (path) => import(pathToFileURL(join(sdk, path)).href);
const { Client } = await load("client/index.js");
const { ElicitRequestSchema } = await load("types.js");

const client = new Client({ name: "hcmcp-ts-sdk-test", version: "1" },
                          { capabilities: plan.elicitation ? { elicitation: { form: {} } } : {} });
let answer = "decline";
if (plan.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async () => {
        if (answer === "fail") throw new Error("this host could not show the dialog");
        if (answer === "accept") return { action: "accept", content: { confirm: true } };
        return { action: answer };
    });
}
let transport;
if (plan.server.url) {
    const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
    transport = new StreamableHTTPClientTransport(new URL(plan.server.url));
} else {
    const { StdioClientTransport } = await load("client/stdio.js");
    const [command, ...args] = plan.server.command;
    transport = new StdioClientTransport({ command, args, env: plan.server.env, stderr: "ignore" });
}
await client.connect(transport);
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");

const listed = await client.listTools();   // caches each tool's outputSchema validator
say({ listed: listed.tools.length });
const checks = await client.callTool({ name: "list_checks", arguments: {} });
const first = checks.structuredContent.checks[0].uuid;

for (const call of plan.calls) {
    const args = Object.fromEntries(Object.entries(call.arguments).map(
        ([key, value]) => [key, value === "$first" ? first : value]));
    answer = call.answer ?? "decline";
    const row = { name: call.name, arguments: call.arguments, threw: null };
    try {
        const result = await client.callTool({ name: call.name, arguments: args });
        row.isError = result.isError === true;
        row.text = (result.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
        row.meta = result._meta ?? null;
        row.structuredContent = result.structuredContent ?? null;
    } catch (error) {
        row.threw = String(error && error.message ? error.message : error);
    }
    say(row);
}
await client.close();
