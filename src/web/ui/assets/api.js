// REST access for the kiwi web UI: the auth token, JSON requests and errors, URLs that carry the
// token (WebSocket, downloads, media). The endpoints are described in docs/web-ui.md.

const TOKEN_KEY = "kiwi.token";
const TOKEN_TTL_MS = 24 * 60 * 60 * 1000;

/** Takes `?token=` from the address bar (keeping it for a day) and removes it from the URL. */
export function adoptTokenFromUrl() {
  const url = new URL(window.location.href);
  const token = url.searchParams.get("token");
  if (token !== null) {
    setToken(token);
    url.searchParams.delete("token");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
}

export function setToken(token) {
  const clean = (token || "").trim();
  if (!clean) {
    localStorage.removeItem(TOKEN_KEY);
    return;
  }
  localStorage.setItem(TOKEN_KEY, JSON.stringify({ token: clean, expires: Date.now() + TOKEN_TTL_MS }));
}

export function getToken() {
  try {
    const stored = JSON.parse(localStorage.getItem(TOKEN_KEY) || "null");
    if (stored && typeof stored.token === "string" && stored.expires > Date.now()) return stored.token;
  } catch {
    /* a malformed entry counts as none */
  }
  localStorage.removeItem(TOKEN_KEY);
  return null;
}

/** An HTTP error with the server's `detail` made readable. */
export class ApiError extends Error {
  constructor(status, detail) {
    super(describeDetail(status, detail));
    this.status = status;
    this.detail = detail;
  }
}

function describeDetail(status, detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    // Validation errors: each names the field (loc after its first member) and the message.
    return detail
      .map((d) => {
        const where = Array.isArray(d.loc) ? d.loc.slice(1).join(".") : "";
        return where ? `${where}: ${d.msg}` : String(d.msg);
      })
      .join("; ");
  }
  return `HTTP ${status}`;
}

/** Listeners told when the server answers 401 (the UI then asks for a token). */
const unauthorizedListeners = new Set();
export function onUnauthorized(fn) {
  unauthorizedListeners.add(fn);
}

function headers(extra) {
  const h = new Headers(extra || {});
  const token = getToken();
  if (token) h.set("Authorization", `Bearer ${token}`);
  return h;
}

/** `fetch` of a JSON endpoint; resolves with the parsed body, rejects with ApiError. */
export async function api(method, path, body) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers.set("Content-Type", "application/json");
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  return parseResponse(response);
}

async function parseResponse(response) {
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    if (response.status === 401) unauthorizedListeners.forEach((fn) => fn());
    const detail = data && typeof data === "object" && "detail" in data ? data.detail : data;
    throw new ApiError(response.status, detail);
  }
  return data;
}

/** Uploads one file to the session (multipart field `file`). */
export async function uploadFile(sessionId, file) {
  const form = new FormData();
  form.append("file", file, file.name);
  const response = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/files`, {
    method: "POST",
    headers: headers(),
    body: form,
  });
  return parseResponse(response);
}

/** A same-origin URL with the token as a query parameter (for links, images, the socket). */
export function withToken(path) {
  const token = getToken();
  if (!token) return path;
  const sep = path.includes("?") ? "&" : "?";
  return `${path}${sep}token=${encodeURIComponent(token)}`;
}

export function socketUrl(sessionId) {
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${window.location.host}${withToken(`/api/sessions/${encodeURIComponent(sessionId)}/stream`)}`;
}

/** The work-dir file API path for a path relative to the work dir (`/` encoded as `%2F`). */
export function filePath(sessionId, relative) {
  return `/api/sessions/${encodeURIComponent(sessionId)}/files/${encodeURIComponent(relative || "")}`;
}

/**
 * The uploads URL for an absolute upload path: uploads live at `<session dir>/uploads/<name>`,
 * so a path containing `/<session id>/uploads/` maps to that session's uploads endpoint.
 */
export function uploadUrlFor(absPath) {
  const m = /\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\/uploads\/(.+)$/.exec(absPath || "");
  if (!m) return null;
  const rest = m[2].split("/").map(encodeURIComponent).join("/");
  return withToken(`/api/sessions/${m[1]}/uploads/${rest}`);
}

export function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  // Insecure contexts (plain http on a LAN address) lack randomUUID; getRandomValues works there.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
