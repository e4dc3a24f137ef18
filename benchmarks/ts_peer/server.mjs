// The 14 Healthchecks tools on the official TypeScript SDK (@modelcontextprotocol/sdk 1.x McpServer):
// the peer a user would most likely pick instead of hcmcp (ni-c/healthchecks-mcp is built on it).
// Written the way an SDK user writes them, like benchmarks/peers/hc_tools.py for the Python peers:
// zod input schemas, Node's own fetch (undici, keep-alive), `response.json()` on the whole body,
// no byte ceilings. delete_check uses the same two-call token, no elicitation.
//
//   node server.mjs SDK_FOLDER                          # stdio
//   node server.mjs SDK_FOLDER --http 127.0.0.1:PORT    # Streamable HTTP at /mcp (2025-era sessions)
//
// SDK_FOLDER: where .ci/node.sh installed tests/ts_client's lockfile (~/.cache/hcmcp/ts-sdk-<version>),
// so the SDK and zod are the pinned ones. Configured by HEALTHCHECKS_URL and HEALTHCHECKS_API_KEY.
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [folder, ...rest] = process.argv.slice(2);
if (!folder) {
    process.stderr.write("usage: node server.mjs SDK_FOLDER [--http HOST:PORT]\n");
    process.exit(2);
}
const modules = join(folder, "node_modules");
const load = (path) => import(pathToFileURL(join(modules, path)).href);
const sdk = "@modelcontextprotocol/sdk/dist/esm/";
const { McpServer } = await load(sdk + "server/mcp.js");
const z = await load("zod/v4/index.js");

const ROOT = (process.env.HEALTHCHECKS_URL || "https://healthchecks.io").replace(/\/+$/, "");
const API = `${ROOT}/api/v3/`;
const HEADERS = { "X-Api-Key": process.env.HEALTHCHECKS_API_KEY || "" };
const PING_BODY_LIMIT = 64 * 1024;
const SUMMARY_FIELDS = ["uuid", "unique_key", "name", "slug", "tags", "status", "last_ping",
    "next_ping", "timeout", "schedule", "tz"];
const secret = randomBytes(32);

async function call(method, path, { params, json } = {}) {
    const url = new URL(path, API);
    for (const [key, value] of params || []) url.searchParams.append(key, String(value));
    const init = { method, headers: { ...HEADERS }, signal: AbortSignal.timeout(10_000) };
    if (json !== undefined) {
        init.body = JSON.stringify(json);
        init.headers["Content-Type"] = "application/json";
    } else if (method === "POST") {
        init.body = "";
    }
    return fetch(url, init);
}

async function json(method, path, options) {
    const response = await call(method, path, options);
    if (response.status >= 400) {
        const text = await response.text();
        throw new Error(`Healthchecks answered ${response.status}: ${text.slice(0, 200)}`);
    }
    return response.json();
}

const result = (value) => ({
    content: [{ type: "text", text: JSON.stringify(value) }],
    structuredContent: value,
});

function fields(values) {
    // The create/update body: only what was passed, lists joined the way the API stores them.
    const body = {};
    for (const [name, value] of Object.entries(values)) {
        if (value === undefined || value === null) continue;
        if (name === "tags") body[name] = value.join(" ");
        else if (name === "channels" && Array.isArray(value)) body[name] = value.join(",");
        else body[name] = value;
    }
    return body;
}

const token = (uuid) => createHmac("sha256", secret).update(uuid).digest("hex").slice(0, 32);
const sameToken = (a, b) => {
    const x = createHash("sha256").update(a).digest();
    const y = createHash("sha256").update(b).digest();
    return timingSafeEqual(x, y);
};

const checkId = z.string().describe("A UUID, or a 40-character unique_key where allowed");
const uuid = z.string().describe("The check's UUID");
const limit = z.number().int().min(1).max(500).default(50).describe("At most this many entries");
const span = z.number().int().min(60).max(31536000);
const editable = {
    name: z.string().optional(),
    slug: z.string().optional(),
    desc: z.string().optional(),
    tags: z.array(z.string()).optional(),
    timeout: span.optional(),
    schedule: z.string().optional(),
    tz: z.string().optional(),
    grace: span.optional(),
    manual_resume: z.boolean().optional(),
    methods: z.enum(["", "POST"]).optional(),
};

// [name, description, input schema, read only, destructive, handler]
const TOOLS = [
    ["list_checks", "Lists the checks of the project the API key belongs to.", {
        tag: z.array(z.string()).optional(),
        slug: z.string().optional(),
        status: z.enum(["new", "up", "grace", "down", "paused"]).optional(),
        limit,
    }, true, false, async ({ tag, slug, status, limit }) => {
        const params = (tag || []).map((t) => ["tag", t]);
        if (slug) params.push(["slug", slug]);
        let checks = (await json("GET", "checks/", { params })).checks;
        if (status) checks = checks.filter((c) => c.status === status);
        // Compact summaries, like hcmcp's: descriptions and URLs are get_check's business.
        const summaries = checks.slice(0, limit).map(
            (c) => Object.fromEntries(SUMMARY_FIELDS.filter((k) => k in c).map((k) => [k, c[k]])));
        return { checks: summaries, total: checks.length };
    }],
    ["get_check", "One check with every field.", { check: checkId }, true, false,
        async ({ check }) => json("GET", `checks/${check.toLowerCase()}`)],
    ["list_pings", "Recent pings of a check, newest first.", {
        check: uuid,
        type: z.enum(["success", "start", "fail", "log", "ign"]).optional(),
        limit,
    }, true, false, async ({ check, type, limit }) => {
        let pings = (await json("GET", `checks/${check.toLowerCase()}/pings/`)).pings;
        if (type) pings = pings.filter((p) => p.type === type);
        return { pings: pings.slice(0, limit) };
    }],
    ["get_ping_body", "The body a job POSTed with one ping, truncated at 64 KB.", {
        check: uuid,
        n: z.number().int().min(0),
    }, true, false, async ({ check, n }) => {
        const response = await call("GET", `checks/${check.toLowerCase()}/pings/${n}/body`);
        if (response.status >= 400) throw new Error(`Healthchecks answered ${response.status}`);
        const text = await response.text();
        return { body: text.slice(0, PING_BODY_LIMIT), truncated: text.length > PING_BODY_LIMIT };
    }],
    ["list_flips", "The up/down transitions of a check.", {
        check: checkId,
        seconds: z.number().int().min(0).max(31536000).optional(),
        start: z.number().int().optional(),
        end: z.number().int().optional(),
        limit,
    }, true, false, async ({ check, seconds, start, end, limit }) => {
        const params = Object.entries({ seconds, start, end }).filter(([, v]) => v !== undefined);
        const flips = (await json("GET", `checks/${check.toLowerCase()}/flips/`, { params })).flips;
        return { flips: flips.slice(0, limit) };
    }],
    ["list_integrations", "The project's notification integrations.", {}, true, false,
        async () => json("GET", "channels/")],
    ["list_badges", "The project's status badge URLs.", {}, true, false,
        async () => json("GET", "badges/")],
    ["get_status", "Whether the instance is reachable and its database answers.", {}, true, false,
        async () => {
            const response = await call("GET", "status/");
            return { status_code: response.status, text: (await response.text()).slice(0, 4096) };
        }],
    ["get_api_key_info", "Whether the key is accepted, and whether it is read-only or read-write.", {},
        true, false, async () => {
            const checks = await call("GET", "checks/");
            await checks.arrayBuffer();
            if (checks.status === 401) return { accepted: false };
            const channels = await call("GET", "channels/");
            await channels.arrayBuffer();
            return { accepted: true, read_write: channels.status === 200 };
        }],
    ["create_check", "Creates a check.", {
        ...editable,
        channels: z.union([z.array(z.string()), z.literal("*")]).default("*"),
        unique: z.array(z.enum(["name", "slug", "tags", "timeout", "grace"])).optional(),
    }, false, false, async (args) => json("POST", "checks/", { json: fields(args) })],
    ["update_check", "Changes the given fields of a check.", {
        check: uuid,
        ...editable,
        channels: z.union([z.array(z.string()), z.literal("*")]).optional(),
    }, false, false, async ({ check, ...args }) =>
        json("POST", `checks/${check.toLowerCase()}`, { json: fields(args) })],
    ["pause_check", "Pauses a check: it stops expecting pings, and stops alerting.", { check: uuid },
        false, false, async ({ check }) => json("POST", `checks/${check.toLowerCase()}/pause`)],
    ["resume_check", "Puts a paused check back into the new state.", { check: uuid }, false, false,
        async ({ check }) => json("POST", `checks/${check.toLowerCase()}/resume`)],
    ["delete_check", "Deletes a check permanently. Call once for a token, then again with it.", {
        check: uuid,
        confirm_token: z.string().optional(),
    }, false, true, async ({ check, confirm_token }) => {
        const id = check.toLowerCase();
        if (confirm_token === undefined || !sameToken(confirm_token, token(id))) {
            return {
                deleted: false,
                confirm_token: token(id),
                message: "Deleting cannot be undone. Call again with this confirm_token.",
            };
        }
        return { deleted: true, check: await json("DELETE", `checks/${id}`) };
    }],
];

function build() {
    const server = new McpServer({ name: "healthchecks-ts-sdk-peer", version: "0" });
    for (const [name, description, inputSchema, readOnly, destructive, handler] of TOOLS) {
        server.registerTool(name, {
            description,
            inputSchema,
            annotations: { readOnlyHint: readOnly, destructiveHint: destructive },
        }, async (args) => result(await handler(args)));
    }
    return server;
}

const httpAt = rest[0] === "--http" ? rest[1] : undefined;
if (!httpAt) {
    const { StdioServerTransport } = await load(sdk + "server/stdio.js");
    await build().connect(new StdioServerTransport());
} else {
    // The SDK's stateful example: one transport (and one McpServer) per session, kept by its id.
    const { StreamableHTTPServerTransport } = await load(sdk + "server/streamableHttp.js");
    const sessions = new Map();
    const host = httpAt.slice(0, httpAt.lastIndexOf(":"));
    const port = Number(httpAt.slice(httpAt.lastIndexOf(":") + 1));
    const http = createServer(async (req, res) => {
        if (new URL(req.url, "http://localhost").pathname !== "/mcp") {
            res.writeHead(404).end();
            return;
        }
        const id = req.headers["mcp-session-id"];
        let transport = id ? sessions.get(id) : undefined;
        if (id && !transport) {
            res.writeHead(404, { "Content-Type": "application/json" }).end(JSON.stringify(
                { jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
            return;
        }
        if (!transport) {
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: (sid) => sessions.set(sid, transport),
            });
            transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
            await build().connect(transport);
        }
        await transport.handleRequest(req, res);
    });
    http.keepAliveTimeout = 60_000;
    http.listen(port, host);
    const shut = () => {
        http.close();
        http.closeAllConnections();
        process.exit(0);
    };
    process.on("SIGTERM", shut);
    process.on("SIGINT", shut);
}
