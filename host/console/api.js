// The one way the console talks to the server: the public API under
// /api/v1, with the token the user signed in with as a bearer token.
// Every failure becomes an ApiError carrying the API's error shape
// ({"error": {code, message, details}}); a 401 sends the user back to
// the sign-in page.

const TOKEN_KEY = 'sandpiper.token';
const BASE = '/api/v1';

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }

  /** The request field the error names, if any (a parameter, a field). */
  get field() {
    return this.details.field || this.details.parameter || null;
  }
}

let onUnauthenticated = () => {};

/** What to do when the server says the token is not (or no longer) valid. */
export function whenUnauthenticated(handler) {
  onUnauthenticated = handler;
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function signIn(value) {
  sessionStorage.setItem(TOKEN_KEY, value.trim());
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function failure(status, text) {
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  const e = body && body.error;
  const error = e
    ? new ApiError(status, e.code, e.message, e.details)
    : new ApiError(status, `http_${status}`, text || `HTTP ${status}`);
  if (status === 401) onUnauthenticated(error);
  return error;
}

/**
 * Calls the API: request('GET', '/clusters'), request('PUT', path, body).
 * A body that is not a Blob is sent as JSON. Answers the parsed JSON (or
 * null for an empty body); throws ApiError.
 */
export async function request(method, path, body) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(BASE + path, init);
  } catch (e) {
    throw new ApiError(0, 'network', `The server did not answer (${e.message}).`);
  }
  const text = await response.text();
  if (!response.ok) throw await failure(response.status, text);
  return text ? JSON.parse(text) : null;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body === undefined ? {} : body);
export const put = (path, body) => request('PUT', path, body);
export const del = (path) => request('DELETE', path);

/**
 * Uploads a .wasm file with progress (fetch reports no upload progress, so
 * this one call uses XMLHttpRequest). onProgress gets 0..1.
 */
export function upload(path, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', BASE + path);
    for (const [k, v] of Object.entries(headers({ 'Content-Type': 'application/wasm' }))) {
      xhr.setRequestHeader(k, v);
    }
    xhr.upload.addEventListener('progress', (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    });
    xhr.addEventListener('load', async () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve({ status: xhr.status, body: xhr.responseText ? JSON.parse(xhr.responseText) : null });
      } else {
        reject(await failure(xhr.status, xhr.responseText));
      }
    });
    xhr.addEventListener('error', () => reject(new ApiError(0, 'network', 'The upload did not reach the server.')));
    xhr.send(file);
  });
}
