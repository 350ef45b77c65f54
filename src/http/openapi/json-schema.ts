import { createHash } from 'node:crypto';
import { z } from 'zod';

export type JsonSchema = Record<string, unknown>;

const LOCAL_REF = /^#\/\$defs\/(.+)$/;
/** The names zod gives definitions it had to extract itself; any other name is an `id` a schema declared. */
const ANONYMOUS = /^__schema\d+$/;

/** Names for the recursive schemas the routes share, recognised by shape; anything else gets a digest name. */
function friendlyName(definition: JsonSchema): string | undefined {
  const members = Array.isArray(definition.anyOf) ? (definition.anyOf as JsonSchema[]) : [];
  const types = members
    .map((member) => member.type)
    .sort()
    .join(',');
  if (types === 'array,boolean,null,number,object,string') return 'JsonValue';
  if (members.some((member) => (member.properties as JsonSchema | undefined)?.and !== undefined))
    return 'FilterExpression';
  return undefined;
}

function mapRefs(node: unknown, replace: (local: string) => string): unknown {
  if (Array.isArray(node)) return node.map((item) => mapRefs(item, replace));
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).map(([key, value]) => {
      const local = key === '$ref' && typeof value === 'string' ? LOCAL_REF.exec(value)?.[1] : undefined;
      return [key, local === undefined ? mapRefs(value, replace) : replace(local)];
    }),
  );
}

/**
 * zod's z.json() spelled out (a union of the six JSON types, recursing through arrays and objects) says nothing a
 * JSON document does not already guarantee, and openapi-typescript turns it into a type TypeScript rejects
 * ("'JsonValue' is referenced directly or indirectly in its own type annotation"). The empty schema means the same.
 */
const ANY_JSON: JsonSchema = {
  description: 'Any JSON value: null, a boolean, a number, a string, an array or an object.',
};

const digest = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('hex');

/**
 * Turns zod schemas into the JSON Schema of one OpenAPI document. zod names the definitions a recursive schema
 * needs `__schema0`, `__schema1`… inside each generated schema's own `$defs`, numbered per call, so embedding them
 * left refs to a `#/$defs` the document does not have. Each definition is hoisted into `components.schemas`
 * instead, once: definitions are identified by their content, with each local ref replaced by the content digest
 * of its target (two rounds, which tells the filter and JSON value definitions apart whatever zod numbered them).
 * A schema that declares an `id` (`.meta({ id: 'Job' })`) becomes the component of that name.
 */
export class SchemaComponents {
  readonly schemas: Record<string, JsonSchema> = {};
  private readonly nameByDigest = new Map<string, string>();

  constructor(named: Record<string, z.ZodType>) {
    for (const [name, schema] of Object.entries(named)) this.schemas[name] = this.of(schema, 'output');
  }

  of(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
    const generated = z.toJSONSchema(schema, {
      io,
      unrepresentable: 'any',
      cycles: 'ref',
      reused: 'inline',
    }) as JsonSchema;
    const { $schema: _dialect, $defs, ...root } = generated;
    const names = this.hoist(($defs ?? {}) as Record<string, JsonSchema>);
    return mapRefs(root, (local) => `#/components/schemas/${names.get(local)}`) as JsonSchema;
  }

  private hoist(definitions: Record<string, JsonSchema>): Map<string, string> {
    const firstRound = new Map(
      Object.entries(definitions).map(([local, definition]) => [local, digest(mapRefs(definition, () => '#'))]),
    );
    const identity = new Map(
      Object.entries(definitions).map(([local, definition]) => [
        local,
        digest(mapRefs(definition, (target) => (target === local ? '#self' : `#${firstRound.get(target)}`))),
      ]),
    );
    const names = new Map<string, string>();
    for (const [local, definition] of Object.entries(definitions)) {
      const key = identity.get(local)!;
      const wanted = ANONYMOUS.test(local) ? friendlyName(definition) : local;
      names.set(local, this.nameByDigest.get(key) ?? this.freeName(wanted ?? `Schema${key.slice(0, 8)}`));
      this.nameByDigest.set(key, names.get(local)!);
    }
    for (const [local, definition] of Object.entries(definitions)) {
      if (names.get(local) === 'JsonValue') {
        this.schemas.JsonValue ??= ANY_JSON;
        continue;
      }
      this.schemas[names.get(local)!] ??= mapRefs(
        definition,
        (target) => `#/components/schemas/${names.get(target)}`,
      ) as JsonSchema;
    }
    return names;
  }

  private freeName(wanted: string): string {
    let name = wanted;
    for (
      let suffix = 2;
      Object.hasOwn(this.schemas, name) || [...this.nameByDigest.values()].includes(name);
      suffix += 1
    )
      name = `${wanted}${suffix}`;
    return name;
  }
}
