import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { openApiDocument } from '../../src/http/openapi/document.ts';
import { routes } from '../../src/http/rest/routes.ts';

/**
 * Every answer a test receives from /v1 or /oauth is checked against the OpenAPI document the service serves
 * (issue 17): its method and path must be an operation, its status one the operation lists (or its `default`),
 * and a JSON body must satisfy that status's schema. A mismatch throws, so it fails the test that received it.
 */

type Json = Record<string, any>;

const DOCUMENT_ID = 'https://workspace-data-service.test/openapi.json';
const CHECKED_PATH = /^\/(v1|oauth)(\/|$)/;

interface Operation {
  template: string;
  pattern: RegExp;
  literalSegments: number;
  methods: Json;
}

interface Contract {
  document: Json;
  ajv: Ajv2020;
  operations: Operation[];
  validators: Map<string, ValidateFunction>;
}

let contract: Contract | undefined;

function pointerSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** Built once per test process: the document is generated from the same declarations the router serves. */
function loadContract(): Contract {
  if (contract) return contract;
  const document = openApiDocument(routes) as Json;
  // strict: false because the document (not only its schemas) is registered, so that `#/components/…` refs resolve.
  const ajv = new Ajv2020({ strict: false, allErrors: true, formats: { starts_with: true } });
  addFormats.default(ajv);
  ajv.addSchema({ ...document, $id: DOCUMENT_ID });
  const operations = Object.entries(document.paths as Json).map(([template, methods]) => ({
    template,
    methods,
    pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    literalSegments: template.split('/').filter((segment) => segment && !segment.startsWith('{')).length,
  }));
  // A literal path (/v1/me/keys) wins over a template that also matches it.
  operations.sort((a, b) => b.literalSegments - a.literalSegments);
  contract = { document, ajv, operations, validators: new Map() };
  return contract;
}

function resolve(document: Json, value: Json): Json {
  if (typeof value?.$ref !== 'string') return value;
  return value.$ref
    .slice(2)
    .split('/')
    .reduce((node: Json, key: string) => node[key.replaceAll('~1', '/').replaceAll('~0', '~')], document);
}

function mediaTypeOf(contentType: string | null): string | null {
  return contentType?.split(';')[0]!.trim().toLowerCase() || null;
}

function isJson(mediaType: string): boolean {
  return mediaType === 'application/json' || mediaType.endsWith('+json');
}

function validatorFor(checked: Contract, pointer: string): ValidateFunction {
  let validate = checked.validators.get(pointer);
  if (!validate) {
    validate = checked.ajv.compile({ $ref: `${DOCUMENT_ID}#${pointer}` });
    checked.validators.set(pointer, validate);
  }
  return validate;
}

/** HEAD is GET without the body (RFC 9110 §9.3.2): the document's GET operation describes it. */
function documentedMethod(method: string): string {
  const lower = method.toLowerCase();
  return lower === 'head' ? 'get' : lower;
}

/**
 * The most specific path that matches decides, as the router does: a literal path (`…/rows/similar`) reserves every
 * method, so `DELETE …/rows/similar` is its 405, not `DELETE …/rows/{rowId}`.
 */
function operationOf(checked: Contract, method: string, pathname: string): Operation | undefined {
  const path = checked.operations.find((candidate) => candidate.pattern.test(pathname));
  return path?.methods[method] ? path : undefined;
}

/** Whether the document has an operation for this method and path (a request outside /v1 and /oauth counts as described). */
export function describesRequest(method: string, url: string): boolean {
  const { pathname } = new URL(url, 'http://localhost');
  return !CHECKED_PATH.test(pathname) || operationOf(loadContract(), documentedMethod(method), pathname) !== undefined;
}

export interface ContractAnswer {
  method: string;
  url: string;
  status: number;
  contentType: string | null;
  /** The body; null when it was not read (an event stream). */
  text: string | null;
}

/** The reason an answer breaks the document, or null when it keeps it (or lies outside /v1 and /oauth). */
export function contractProblem(answer: ContractAnswer): string | null {
  const { pathname } = new URL(answer.url, 'http://localhost');
  if (!CHECKED_PATH.test(pathname)) return null;
  const checked = loadContract();
  const method = documentedMethod(answer.method);
  const operation = operationOf(checked, method, pathname);
  if (!operation) return `${answer.method} ${pathname} is not an operation of the OpenAPI document`;
  const responses = operation.methods[method].responses as Json;
  const key = Object.hasOwn(responses, String(answer.status))
    ? String(answer.status)
    : Object.hasOwn(responses, 'default')
      ? 'default'
      : null;
  if (key === null) return `status ${answer.status} is not listed (${Object.keys(responses).join(', ')})`;
  if (answer.method.toUpperCase() === 'HEAD') return null;
  const response = resolve(checked.document, responses[key]);
  const content = response.content as Json | undefined;
  const mediaType = mediaTypeOf(answer.contentType);
  if (!content)
    return !answer.text ? null : `status ${answer.status} is documented without a body, but one came (${mediaType})`;
  if (mediaType === null)
    return `status ${answer.status} answered no Content-Type (documented: ${Object.keys(content).join(', ')})`;
  const documented = Object.hasOwn(content, mediaType) ? mediaType : Object.hasOwn(content, '*/*') ? '*/*' : null;
  if (documented === null)
    return `status ${answer.status} answered ${mediaType} (documented: ${Object.keys(content).join(', ')})`;
  if (!isJson(mediaType) || answer.text === null) return null;
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    return `status ${answer.status} answered ${mediaType} that is not JSON`;
  }
  const responsePointer =
    typeof responses[key].$ref === 'string'
      ? responses[key].$ref.slice(1)
      : `/paths/${pointerSegment(operation.template)}/${method}/responses/${key}`;
  const validate = validatorFor(checked, `${responsePointer}/content/${pointerSegment(documented)}/schema`);
  if (validate(body)) return null;
  const errors = (validate.errors ?? [])
    .slice(0, 5)
    .map((error) => `${error.instancePath || '/'} ${error.message} ${JSON.stringify(error.params)}`);
  return `status ${answer.status} body breaks its schema: ${errors.join('; ')}`;
}

/** Throws when the answer breaks the document; the message names the request and shows the body. */
export function expectContract(answer: ContractAnswer): void {
  const problem = contractProblem(answer);
  if (problem)
    throw new Error(
      `OpenAPI contract: ${answer.method} ${new URL(answer.url, 'http://localhost').pathname}: ${problem}\n${(answer.text ?? '').slice(0, 500)}`,
    );
}

/**
 * fetch, with the answer checked against the document before it is returned (the body is read from a clone, so
 * the caller can still read it). An event stream is checked by status and media type only: its body never ends
 * while the test holds it.
 */
export async function checkedFetch(url: string, init: RequestInit = {}): Promise<Response> {
  const response = await fetch(url, init);
  const contentType = response.headers.get('content-type');
  const streaming = mediaTypeOf(contentType) === 'text/event-stream';
  const text = streaming ? null : await response.clone().text();
  expectContract({ method: init.method ?? 'GET', url, status: response.status, contentType, text });
  return response;
}
