// TLS with a CA file and a client certificate, which the global fetch cannot
// take: a fetch over node:https with them (Node.js only; the rest of the
// client needs nothing but fetch). https URLs go through it; other URLs go to
// the global fetch.

/** The TLS files of `new Client` (see ClientOptions). */
export interface TlsFiles {
  caFile?: string | undefined;
  certFile?: string | undefined;
  keyFile?: string | undefined;
}

// The parts of node:fs and node:https used here (the package ships without
// Node's types, so that it builds and runs outside Node too).
interface NodeFs {
  readFileSync(path: string): Uint8Array;
}
interface NodeResponse {
  statusCode?: number;
  headers: Record<string, string | string[] | undefined>;
  on(event: "data", f: (chunk: Uint8Array) => void): NodeResponse;
  on(event: "end", f: () => void): NodeResponse;
  on(event: "error", f: (e: Error) => void): NodeResponse;
}
interface NodeRequest {
  on(event: "error", f: (e: Error) => void): NodeRequest;
  end(body?: string): void;
}
interface NodeHttps {
  Agent: new (options: Record<string, unknown>) => unknown;
  request(url: string, options: Record<string, unknown>, answer: (res: NodeResponse) => void): NodeRequest;
}

/**
 * node:fs and node:https, when the runtime has them (Node.js 20.16+, through
 * `process.getBuiltinModule`: synchronous, and nothing is loaded elsewhere).
 */
function nodeModules(): { fs: NodeFs; https: NodeHttps } | undefined {
  const proc = (globalThis as { process?: { getBuiltinModule?: (name: string) => unknown } }).process;
  const load = proc?.getBuiltinModule;
  if (load === undefined) return undefined;
  return { fs: load.call(proc, "node:fs") as NodeFs, https: load.call(proc, "node:https") as NodeHttps };
}

/** Statuses whose answers have no body (a Response refuses one). */
const NO_BODY = new Set([101, 204, 205, 304]);

/**
 * A fetch whose https requests trust the CA of `caFile` (instead of the
 * system's) and present the client certificate of `certFile` and `keyFile`.
 * The files are read now.
 *
 * Throws a TypeError for a key without a certificate or outside Node.js, and
 * an Error naming the file when one cannot be read.
 */
export function tlsFetch(files: TlsFiles): typeof fetch {
  if (files.keyFile !== undefined && files.certFile === undefined) {
    throw new TypeError("keysmith: keyFile needs certFile (the client certificate the key belongs to)");
  }
  const node = nodeModules();
  if (node === undefined) {
    throw new TypeError(
      "keysmith: caFile, certFile and keyFile need Node.js 20.16 or later (node:https); elsewhere pass a fetch that trusts the CA",
    );
  }
  const { fs, https } = node;
  const read = (option: string, path: string | undefined) => {
    if (path === undefined) return undefined;
    try {
      return fs.readFileSync(path);
    } catch (e) {
      throw new Error(`keysmith: cannot read ${option} ${path}: ${(e as Error).message}`, { cause: e });
    }
  };
  const ca = read("caFile", files.caFile);
  const cert = read("certFile", files.certFile);
  // A certificate file may hold its key too.
  const key = files.keyFile === undefined ? cert : read("keyFile", files.keyFile);
  const agent = new https.Agent({ keepAlive: true, ca, cert, key });
  const plain = globalThis.fetch.bind(globalThis);

  return ((input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith("https:")) return plain(input, init);
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => {
      headers[k] = v;
    });
    return new Promise<Response>((resolve, reject) => {
      // As the global fetch fails: a TypeError with the cause (its code says
      // whether the request was sent).
      const failed = (e: Error) => reject(new TypeError("fetch failed", { cause: e }));
      const req = https.request(url, { method: init?.method ?? "GET", headers, agent, signal: init?.signal ?? undefined }, (res) => {
        const chunks: Uint8Array[] = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", failed);
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          const out = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (v !== undefined) out.set(k, Array.isArray(v) ? v.join(", ") : v);
          }
          resolve(new Response(NO_BODY.has(status) ? null : concat(chunks), { status, headers: out }));
        });
      });
      req.on("error", failed);
      req.end(typeof init?.body === "string" ? init.body : undefined);
    });
  }) as typeof fetch;
}

function concat(chunks: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * A file's text (Node.js), for `tokenFile`. Throws an Error naming `option`
 * and the file when it cannot be read, a TypeError outside Node.js.
 */
export function readText(path: string, option: string): string {
  const node = nodeModules();
  if (node === undefined) throw new TypeError(`keysmith: ${option} needs Node.js 20.16 or later (node:fs)`);
  let bytes: Uint8Array;
  try {
    bytes = node.fs.readFileSync(path);
  } catch (e) {
    throw new Error(`keysmith: cannot read ${option} ${path}: ${(e as Error).message}`, { cause: e });
  }
  return new TextDecoder().decode(bytes);
}
