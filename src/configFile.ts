/**
 * The configuration file, `stepd.config.json`: MCP servers (in the `mcpServers` shape MCP
 * clients use), permissions and limits. `"${VAR}"` inside any string value is replaced from the
 * environment, so secrets stay out of the file. Every problem is reported as a ConfigError whose
 * issues name the offending key (`mcpServers.kb.command`).
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ConfigError } from './errors.js';
import { trustProxySchema } from './http/trustedProxies.js';
import { rateSpecSchema } from './tools/rates.js';
import type { Secrets } from './secrets.js';
import { llmConfigSchema, type LlmConfig } from './tools/llm/llmConfig.js';
import { retentionSchema, type RetentionPolicy } from './retention/retentionPolicy.js';
import { approvalLinksSchema, notifySchema, type ApprovalLinksConfig, type NotifyHook } from './notify/notifyConfig.js';
import { workerConfigIssues, workersSchema, type WorkersConfig } from './workers/workersConfig.js';

/** Prefixes of the built-in tools; an MCP server may not take these names. */
export const RESERVED_SERVER_NAMES: readonly string[] = ['core', 'http', 'llm'];

const SERVER_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;
/** `*`, `kb.*`, `kb.search`, `llm.sum*`: a `*` may only end a pattern. */
const TOOL_PATTERN = /^(\*|[A-Za-z][A-Za-z0-9_-]*\.[^*\s]*\*?)$/;

const stringMap = z.record(z.string(), z.string());

export const stdioServerSchema = z.strictObject({
  command: z.string().min(1, 'must not be empty'),
  args: z.array(z.string()).optional(),
  env: stringMap.optional(),
  cwd: z.string().min(1, 'must not be empty').optional(),
});

export const httpServerSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }),
  headers: stringMap.optional(),
});

const toolPattern = z.string().regex(TOOL_PATTERN, 'must be "*", "server.*" or "server.tool" (a "*" may only end a pattern)');
const positiveInt = z.number().int('must be a whole number').positive('must be at least 1');

export const permissionsSchema = z.strictObject({
  default: z.array(toolPattern).optional(),
  users: z.record(z.string().min(1), z.array(toolPattern)).optional(),
});

export const limitsSchema = z.strictObject({
  concurrency: positiveInt.optional(),
  tools: z.record(toolPattern, positiveInt).optional(),
  users: z.record(z.string().min(1), positiveInt).optional(),
  /** The per-user maximum for every user not named under `users`. */
  defaultUser: positiveInt.optional(),
  /** Token buckets per tool pattern (src/tools/rates.ts, docs/limits-and-fairness.md). */
  rates: z.record(toolPattern, rateSpecSchema).optional(),
});

/** Egress policy of `http.request`: URL patterns (prefix match, `*` any characters) that may reach private addresses. */
export const httpPolicySchema = z.strictObject({
  allow: z.array(z.string().min(1, 'must not be empty')).optional(),
  /** Per-user extra allow entries. */
  users: z.record(z.string().min(1), z.array(z.string().min(1, 'must not be empty'))).optional(),
});

/** Which users (patterns, `*` any characters) each database role may start workflows as. */
export const clientsSchema = z.record(
  z.string().min(1),
  z.strictObject({
    actAs: z.array(z.string().min(1, 'must not be empty')).optional(),
    /** The highest `workflows.priority` this role's inserts keep (sql/0028); default 0. */
    maxPriority: z.number().int().min(0).max(1_000_000).optional(),
  }),
);

/** The operator's caps on what a flow may ask for. */
export const capsSchema = z.strictObject({
  steps: positiveInt.optional(),
  forEachItems: positiveInt.optional(),
  forEachConcurrency: positiveInt.optional(),
  // At most 8 MiB: the database refuses an input above 64 MiB as stored (sql/0017), whatever the config says.
  inputBytes: positiveInt.max(8 * 1024 * 1024, 'must be at most 8388608 (8 MiB)').optional(),
  resultBytes: positiveInt.optional(),
  outputBytes: positiveInt.optional(),
  subWorkflowDepth: positiveInt.optional(),
  subWorkflows: positiveInt.optional(),
  flowSteps: positiveInt.optional(),
});

const fileSchema = z.strictObject({
  mcpServers: z.record(z.string(), z.unknown()).optional(),
  permissions: permissionsSchema.optional(),
  limits: limitsSchema.optional(),
  http: httpPolicySchema.optional(),
  clients: clientsSchema.optional(),
  caps: capsSchema.optional(),
  llm: llmConfigSchema.optional(),
  retention: retentionSchema.optional(),
  notify: notifySchema.optional(),
  approvalLinks: approvalLinksSchema.optional(),
  workers: workersSchema.optional(),
  /** Checked by parseApi (its keys are secrets: no issue may name them). */
  api: z.unknown().optional(),
});

/** The shortest bearer token `api.tokens` accepts. */
export const MIN_API_TOKEN_LENGTH = 16;

/** The HTTP API's bearer tokens, each mapped to the user it acts as (`"${OPS_TOKEN}": "alice"`). */
export interface ApiConfig {
  tokens?: Record<string, string>;
  /** Users who may cancel and retry any workflow; every other user only the ones it started. */
  admins?: string[];
  /** Reverse proxies (addresses or CIDR ranges) whose `X-Forwarded-Proto: https` is believed (src/http/trustedProxies.ts). */
  trustProxy?: string[];
}

export type StdioServerConfig = z.infer<typeof stdioServerSchema>;
export type HttpServerConfig = z.infer<typeof httpServerSchema>;
export type McpServerConfig = StdioServerConfig | HttpServerConfig;
export type PermissionsConfig = z.infer<typeof permissionsSchema>;
export type LimitsConfig = z.infer<typeof limitsSchema>;
export type HttpPolicyConfig = z.infer<typeof httpPolicySchema>;
export type ClientsConfig = z.infer<typeof clientsSchema>;
export type CapsConfig = z.infer<typeof capsSchema>;

export interface StepdFileConfig {
  mcpServers?: Record<string, McpServerConfig>;
  permissions?: PermissionsConfig;
  limits?: LimitsConfig;
  http?: HttpPolicyConfig;
  clients?: ClientsConfig;
  caps?: CapsConfig;
  api?: ApiConfig;
  /** Model providers, prices and cost budgets (src/tools/llm/llmConfig.ts). */
  llm?: LlmConfig;
  /** How long finished workflows and signals are kept, in milliseconds (docs/operations.md). */
  retention?: RetentionPolicy;
  /** Webhooks on events, and the approval links they carry (src/notify/notifyConfig.ts). */
  notify?: NotifyHook[];
  approvalLinks?: ApprovalLinksConfig;
  /** Tool prefixes served by workers (src/workers/workersConfig.ts). */
  workers?: WorkersConfig;
}

export function isHttpServer(server: McpServerConfig): server is HttpServerConfig {
  return 'url' in server;
}

type Env = Record<string, string | undefined>;
type PathPart = string | number;
interface Issue {
  path: string;
  message: string;
}

/**
 * Reads and validates a config file. A missing file is an error: the caller decides about defaults.
 * Every value a `${VAR}` expanded to is added to `secrets` (when given), so it can be redacted.
 */
export async function loadConfigFile(path: string, env: Env = process.env, secrets?: Secrets): Promise<StepdFileConfig> {
  return parseConfigFile(await readConfigJson(path), env, path, secrets);
}

/** A config file's JSON as it is written (`${VAR}`s not expanded); ConfigError when it is missing, unreadable or not JSON. */
export async function readConfigJson(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const reason = code === 'ENOENT' ? 'does not exist' : `cannot be read (${(err as Error).message})`;
    throw new ConfigError(`config file ${path} ${reason}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Validates parsed JSON (after `${VAR}` expansion); `source` names the file in error messages.
 * The values `${VAR}` expanded to are added to `secrets` (when given).
 */
export function parseConfigFile(json: unknown, env: Env = process.env, source = 'stepd.config.json', secrets?: Secrets): StepdFileConfig {
  const issues: Issue[] = [];
  const expanded = expandEnv(json, env, [], issues, secrets);
  if (issues.length) throw new ConfigError(`invalid config file ${source}`, issues);

  // Report every problem at once: the sections and each server are checked independently.
  const parsed = fileSchema.safeParse(expanded);
  if (!parsed.success) issues.push(...zodIssues(parsed.error.issues, []));
  const rawServers = isPlainObject(expanded) && isPlainObject(expanded.mcpServers) ? expanded.mcpServers : undefined;
  const servers: Record<string, McpServerConfig> = {};
  for (const [name, raw] of Object.entries(rawServers ?? {})) {
    const server = parseServer(name, raw, ['mcpServers', name], issues);
    if (server) servers[name] = server;
  }
  const api = isPlainObject(expanded) && 'api' in expanded ? parseApi(expanded.api, issues, secrets) : undefined;
  if (isPlainObject(expanded)) issues.push(...workerConfigIssues(expanded.workers, RESERVED_SERVER_NAMES, expanded.mcpServers));
  if (!parsed.success || issues.length) throw new ConfigError(`invalid config file ${source}`, issues);

  const { mcpServers, api: _rawApi, ...rest } = parsed.data;
  return { ...rest, ...(mcpServers ? { mcpServers: servers } : {}), ...(api ? { api } : {}) };
}

/**
 * `"api": {"tokens": {"TOKEN": "user"}}`. Tokens are secrets: every one goes to `secrets`, and
 * no issue names one (paths stop at `api.tokens`; a bad entry is named by its user).
 */
function parseApi(raw: unknown, issues: Issue[], secrets: Secrets | undefined): ApiConfig | undefined {
  if (raw === undefined) return undefined;
  if (!isPlainObject(raw)) {
    issues.push({ path: 'api', message: 'expected an object like {"tokens": {"${OPS_TOKEN}": "alice"}}' });
    return undefined;
  }
  for (const key of Object.keys(raw)) if (!API_KEYS.has(key)) issues.push({ path: formatPath(['api', key]), message: 'unknown key' });
  const admins = parseApiAdmins(raw.admins, issues);
  const trustProxy = parseTrustProxy(raw.trustProxy, issues);
  const withAdmins = { ...(admins ? { admins } : {}), ...(trustProxy ? { trustProxy } : {}) };
  if (raw.tokens === undefined) return withAdmins;
  if (!isPlainObject(raw.tokens)) {
    issues.push({ path: 'api.tokens', message: 'expected an object mapping each token to a user: {"${OPS_TOKEN}": "alice"}' });
    return undefined;
  }
  const tokens: Record<string, string> = {};
  for (const [token, user] of Object.entries(raw.tokens)) {
    secrets?.add(token);
    const who = typeof user === 'string' && user ? `the token of user ${JSON.stringify(user)}` : 'a token';
    if (typeof user !== 'string' || !user.trim()) {
      issues.push({ path: 'api.tokens', message: `${who} must map to a user name (a non-empty string)` });
    } else if (token.length < MIN_API_TOKEN_LENGTH) {
      issues.push({ path: 'api.tokens', message: `${who} is shorter than ${MIN_API_TOKEN_LENGTH} characters; use a long random value from the environment ("\${OPS_TOKEN}")` });
    } else {
      tokens[token] = user;
    }
  }
  return { tokens, ...withAdmins };
}

const API_KEYS = new Set(['tokens', 'admins', 'trustProxy']);

/** `"api": {"trustProxy": ["10.0.0.5", "10.1.0.0/16"]}`: the reverse proxies whose X-Forwarded-Proto counts. */
function parseTrustProxy(raw: unknown, issues: Issue[]): string[] | undefined {
  if (raw === undefined) return undefined;
  const parsed = trustProxySchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  issues.push(...zodIssues(parsed.error.issues, ['api', 'trustProxy']));
  return undefined;
}

/** `"api": {"admins": ["alice", …]}`: user names that may cancel and retry any workflow. */
function parseApiAdmins(raw: unknown, issues: Issue[]): string[] | undefined {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw) || raw.some((u) => typeof u !== 'string' || !u.trim())) {
    issues.push({ path: 'api.admins', message: 'expected an array of user names (non-empty strings), e.g. ["alice"]' });
    return undefined;
  }
  return raw as string[];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseServer(name: string, raw: unknown, path: PathPart[], issues: Issue[]): McpServerConfig | undefined {
  if (!SERVER_NAME.test(name)) {
    issues.push({ path: formatPath(path), message: 'a server name must start with a letter and hold only letters, digits, "_" and "-"' });
    return undefined;
  }
  if (RESERVED_SERVER_NAMES.includes(name)) {
    issues.push({ path: formatPath(path), message: `"${name}" is the prefix of built-in tools; choose another server name` });
    return undefined;
  }
  if (!isPlainObject(raw)) {
    issues.push({ path: formatPath(path), message: 'expected an object with "command" (stdio) or "url" (Streamable HTTP)' });
    return undefined;
  }
  const hasCommand = 'command' in raw;
  const hasUrl = 'url' in raw;
  if (hasCommand === hasUrl) {
    const message = hasCommand
      ? 'a server has either "command" (stdio) or "url" (Streamable HTTP), not both'
      : 'expected "command" (stdio server) or "url" (Streamable HTTP server)';
    issues.push({ path: formatPath(path), message });
    return undefined;
  }
  const result = (hasUrl ? httpServerSchema : stdioServerSchema).safeParse(raw);
  if (result.success) return result.data;
  issues.push(...zodIssues(result.error.issues, path));
  return undefined;
}

/**
 * Replaces `${VAR}` in every string value; a missing variable is an issue at that key. Each
 * expanded value is a secret (Secrets ignores the very short ones).
 */
function expandEnv(value: unknown, env: Env, path: PathPart[], issues: Issue[], secrets: Secrets | undefined): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{([^}]*)\}/g, (whole, name: string) => {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        issues.push({ path: formatPath(path), message: `"${whole}" is not a valid environment variable reference` });
        return whole;
      }
      const found = env[name];
      if (found === undefined) {
        issues.push({ path: formatPath(path), message: `environment variable ${name} is not set` });
        return whole;
      }
      secrets?.add(found);
      return found;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => expandEnv(v, env, [...path, i], issues, secrets));
  if (typeof value === 'object' && value !== null) {
    // The keys of api.tokens are the tokens themselves: expanded too (`"${OPS_TOKEN}": "alice"`).
    const keysAreValues = path.length === 2 && path[0] === 'api' && path[1] === 'tokens';
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const key = keysAreValues ? (expandEnv(k, env, path, issues, secrets) as string) : k;
      if (keysAreValues && Object.hasOwn(out, key)) issues.push({ path: formatPath(path), message: 'two entries expand to the same token' });
      out[key] = expandEnv(v, env, keysAreValues ? path : [...path, k], issues, secrets);
    }
    return out;
  }
  return value;
}

function zodIssues(list: readonly z.core.$ZodIssue[], prefix: PathPart[]): Issue[] {
  const out: Issue[] = [];
  for (const issue of list) {
    const path = [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) out.push({ path: formatPath([...path, key]), message: 'unknown key' });
    } else if (issue.code === 'invalid_key') {
      out.push({ path: formatPath(path), message: `invalid key: ${issue.issues.map((i) => i.message).join('; ')}` });
    } else {
      out.push({ path: formatPath(path), message: issue.message });
    }
  }
  return out;
}

/** `mcpServers.kb.args[0]`, `limits.tools["llm.*"]`. */
export function formatPath(path: readonly PathPart[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (/^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}
