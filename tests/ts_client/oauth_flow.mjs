// The TypeScript SDK v1 client (@modelcontextprotocol/sdk, pinned in package.json beside this file)
// connecting to `hcmcp --http` with HEALTHCHECKS_KEY_SOURCE=oauth through the SDK's own OAuth support:
// an OAuthClientProvider kept in memory, the transport's authProvider, UnauthorizedError, finishAuth.
// tests/test_oauth_clients.py runs it (issue 32).
//
//   node oauth_flow.mjs SDK_FOLDER MCP_URL REDIRECT_URL
//
// The browser step is the test's: when the SDK asks to send the person to the authorization URL this
// prints {"authorize": URL} and reads one line from stdin, {"code", "state"} as they reached the
// redirect URL (the test drives headless chromium there). Then it lists the tools and calls
// list_checks, printing {"checks": [names]}. Then an hour passes, as far as the client knows: a new
// connection with the same stored tokens, the access token no longer accepted, must refresh
// without the person and print {"refreshed": [names], "old_refresh": ..., "new_refresh": ...}.
import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { createInterface } from "node:readline";

const [folder, mcpUrl, redirectUrl] = process.argv.slice(2);
const sdk = join(folder, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");
const load = (path) => import(pathToFileURL(join(sdk, path)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { UnauthorizedError } = await load("client/auth.js");

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");

const stored = { client: undefined, tokens: undefined, verifier: undefined, discovery: undefined };
let expectedState;
const provider = {
    get redirectUrl() { return redirectUrl; },
    get clientMetadata() {
        return {
            client_name: "hcmcp TS SDK test",
            redirect_uris: [redirectUrl],
            grant_types: ["authorization_code", "refresh_token"],
            response_types: ["code"],
            token_endpoint_auth_method: "none",
        };
    },
    state() {
        expectedState = `ts-${Math.random().toString(36).slice(2)}`;
        return expectedState;
    },
    clientInformation() { return stored.client; },
    saveClientInformation(info) { stored.client = info; },
    tokens() { return stored.tokens; },
    saveTokens(tokens) { stored.tokens = tokens; },
    saveCodeVerifier(verifier) { stored.verifier = verifier; },
    codeVerifier() { return stored.verifier; },
    discoveryState() { return stored.discovery; },
    saveDiscoveryState(state) { stored.discovery = state; },
    redirectToAuthorization(url) { say({ authorize: url.href }); },
};

async function names(client) {
    const result = await client.callTool({ name: "list_checks", arguments: {} });
    if (result.isError) throw new Error(`list_checks failed: ${JSON.stringify(result.content)}`);
    return result.structuredContent.checks.map((check) => check.name).sort();
}

function connection() {
    const client = new Client({ name: "hcmcp-ts-oauth-test", version: "1" }, { capabilities: {} });
    const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
    return { client, transport };
}

// 1. No tokens: the server answers 401, the SDK discovers, registers and sends the person away.
let { client, transport } = connection();
try {
    await client.connect(transport);
    throw new Error("connected without signing in");
} catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
}
const { value } = await lines.next();
const answer = JSON.parse(value);
if (answer.state !== expectedState) throw new Error(`state changed on the way: ${answer.state}`);
await transport.finishAuth(answer.code);
({ client, transport } = connection());
await client.connect(transport);
const tools = await client.listTools();
say({ tools: tools.tools.length, checks: await names(client) });
await client.close();

// 2. Later: the access token has expired (the server refuses it), the refresh token has not.
const oldRefresh = stored.tokens.refresh_token;
stored.tokens = { ...stored.tokens, access_token: "expired-access-token" };
({ client, transport } = connection());
await client.connect(transport);
say({ refreshed: await names(client), old_refresh: oldRefresh, new_refresh: stored.tokens.refresh_token,
      client_id: stored.client.client_id });
await client.close();
process.exit(0);
