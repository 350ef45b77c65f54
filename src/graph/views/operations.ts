import { pageById } from '../server/paged.ts';
import { selectViewPageIds, type ViewPageKey } from '../../catalog/views.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { Cursor, PageLimit } from '../../catalog/cursor.ts';
import { idempotent } from '../../idempotency/run.ts';
import type { Caller } from '../../kernel/caller.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { requestLoader } from '../server/loaders.ts';
import { pageRef, type PageArgs, type PageShape } from '../shared/pages.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { CreateViewBody, DeleteViewBody, UpdateViewBody } from '../../contracts/views.ts';
import {
  createView,
  deleteView,
  SavedView,
  toViewShape,
  updateView,
  viewContext,
  visibleView,
  type SavedViewShape,
  type ViewContext,
  type ViewDeletionShape,
  type ViewRow,
} from './views.ts';

/** GraphQL (and so REST) operations on saved views. Personal views need read authority; see views.ts for the rest. */
const CreateViewInput = builder
  .inputType('CreateViewInput', {
    fields: (t) => ({
      expectedSchemaVersion: t.int({ required: true }),
      name: t.string({ required: true }),
      visibility: t.string({ required: true, description: '`personal` or `shared`' }),
      definition: t.field({ type: 'JSON', required: true, description: 'View definition (spec 2.3).' }),
    }),
  })
  .validate(CreateViewBody);

const UpdateViewInput = builder
  .inputType('UpdateViewInput', {
    fields: (t) => ({
      expectedVersion: t.string({ required: true }),
      expectedSchemaVersion: t.int({ description: 'Required when `definition` is given.' }),
      name: t.string(),
      visibility: t.string(),
      definition: t.field({ type: 'JSON' }),
    }),
  })
  .validate(UpdateViewBody);

const DeleteViewInput = builder
  .inputType('DeleteViewInput', {
    fields: (t) => ({ expectedVersion: t.string({ required: true }) }),
  })
  .validate(DeleteViewBody);

const ViewDeletion = builder.objectRef<ViewDeletionShape>('ViewDeletion').implement({
  description: 'Spec 2.8: a deleted view. Its rows are untouched.',
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted'), version: t.exposeString('version') }),
});

export const SavedViewPage = pageRef(
  'SavedViewPage',
  SavedView,
  'The caller’s personal views and the shared views of a table, oldest first.',
);

async function loadViewPages(context: Context, caller: Caller, keys: readonly ViewPageKey[]): Promise<ViewRow[][]> {
  const page = selectViewPageIds(keys, caller.userId);
  const picked = await dataPlane(context).run<{ index: number; id: string }>(page);
  const rows =
    picked.length === 0
      ? []
      : await context.prisma.savedView.findMany({ where: { id: { in: picked.map((pick) => pick.id) } } });
  const byId = new Map(rows.map((row) => [row.id, row]));
  const pages: ViewRow[][] = keys.map(() => []);
  for (const pick of picked) {
    const row = byId.get(pick.id);
    if (row) pages[pick.index - 1]!.push(row);
  }
  return pages.map((page) => page.sort((a, b) => (a.id < b.id ? -1 : 1)));
}

/**
 * A page of the views of a table the caller may see, oldest first: the `views` query and the `Table.views` edge.
 * Pages of many tables asked in one request are read together (two statements for any number of tables).
 */
export async function pageOfViews(
  context: Context,
  scope: ViewContext,
  page: PageArgs,
): Promise<PageShape<SavedViewShape>> {
  const loader = requestLoader<ViewPageKey, ViewRow[]>(
    context,
    'viewPages',
    (keys) => loadViewPages(context, scope.caller, keys),
    (k) => JSON.stringify(k),
  );
  return pageById(context, page, {
    scope: `views:${scope.schema.tableId}:${scope.caller.actorKey}`,
    fetch: ({ after, limit }) =>
      loader.load({
        orgId: scope.schema.orgId,
        tableId: scope.schema.tableId,
        afterId: after ?? null,
        take: limit + 1,
      }),
    toItem: (view) => toViewShape(scope.caller, scope.authority, scope.schema, view),
  });
}

builder.queryFields((t) => ({
  view: t.field({
    type: SavedView,
    args: { ...tableAddressArgs, viewId: t.arg.id({ required: true, validate: Id }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const scope = await viewContext(context, addressOf(args));
      return toViewShape(
        scope.caller,
        scope.authority,
        scope.schema,
        await visibleView(context.prisma, scope, String(args.viewId)),
      );
    },
  }),
  views: t.field({
    type: SavedViewPage,
    args: {
      ...tableAddressArgs,
      limit: t.arg.int({ validate: PageLimit.optional() }),
      cursor: t.arg.string({ validate: Cursor.optional() }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => pageOfViews(context, await viewContext(context, addressOf(args)), args),
  }),
}));

builder.mutationFields((t) => ({
  createView: t.field({
    type: SavedView,
    description: 'Saves a view (endpoint 1). Shared views need current row write authority; 100 views per scope.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: CreateViewInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const body = args.input;
      const address = addressOf(args);
      const scope = await viewContext(context, address);
      return idempotent(
        context,
        { operation: 'createView', key: args.idempotencyKey, input: { ...address, ...body } },
        (tx) => createView(tx, scope, body),
      );
    },
  }),
  updateView: t.field({
    type: SavedView,
    description: 'Renames a view, moves it between personal and shared, or replaces its definition.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      viewId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: UpdateViewInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const body = args.input;
      const address = addressOf(args);
      const viewId = String(args.viewId);
      const scope = await viewContext(context, address);
      return idempotent(
        context,
        { operation: 'updateView', key: args.idempotencyKey, input: { ...address, viewId, ...body } },
        (tx) => updateView(tx, scope, viewId, body),
      );
    },
  }),
  deleteView: t.field({
    type: ViewDeletion,
    description: 'Deletes a view (endpoint 2): its owner for a personal view, row write authority for a shared one.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      viewId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: DeleteViewInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const body = args.input;
      const address = addressOf(args);
      const viewId = String(args.viewId);
      const scope = await viewContext(context, address);
      return idempotent(
        context,
        { operation: 'deleteView', key: args.idempotencyKey, input: { ...address, viewId, ...body } },
        (tx) => deleteView(tx, scope, viewId, body),
      );
    },
  }),
}));
