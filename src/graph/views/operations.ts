import { builder } from '../builder.ts';
import { Id } from '../common.ts';
import { Cursor, cursorKey, decodeCursor, DEFAULT_PAGE_SIZE, encodeCursor, PageLimit } from '../cursor.ts';
import { idempotent } from '../idempotency.ts';
import { pageOf, pageRef } from '../pages.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { z } from 'zod';
import {
  CreateViewBody, createView, DeleteViewBody, deleteView, SavedView, toViewShape, UpdateViewBody, updateView, viewContext, visibleView,
  type ViewDeletionShape,
} from './views.ts';

/** GraphQL (and so REST) operations on saved views. Personal views need read authority; see views.ts for the rest. */
const CreateViewInput = builder.inputType('CreateViewInput', {
  fields: (t) => ({
    expectedSchemaVersion: t.int({ required: true }),
    name: t.string({ required: true }),
    visibility: t.string({ required: true, description: '`personal` or `shared`' }),
    definition: t.field({ type: 'JSON', required: true, description: 'View definition (spec 2.3).' }),
  }),
  validate: CreateViewBody,
});

const UpdateViewInput = builder.inputType('UpdateViewInput', {
  fields: (t) => ({
    expectedVersion: t.string({ required: true }),
    expectedSchemaVersion: t.int({ description: 'Required when `definition` is given.' }),
    name: t.string(),
    visibility: t.string(),
    definition: t.field({ type: 'JSON' }),
  }),
  validate: UpdateViewBody,
});

const DeleteViewInput = builder.inputType('DeleteViewInput', {
  fields: (t) => ({ expectedVersion: t.string({ required: true }) }),
  validate: DeleteViewBody,
});

const ViewDeletion = builder.objectRef<ViewDeletionShape>('ViewDeletion').implement({
  description: 'Spec 2.8: a deleted view. Its rows are untouched.',
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted'), version: t.exposeString('version') }),
});

const SavedViewPage = pageRef('SavedViewPage', SavedView, 'The caller’s personal views and the shared views of a table, oldest first.');
const PagePosition = z.strictObject({ id: Id });

builder.queryFields((t) => ({
  view: t.field({
    type: SavedView,
    args: { ...tableAddressArgs, viewId: t.arg.id({ required: true, validate: Id }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const scope = await viewContext(context, addressOf(args));
      return toViewShape(scope.caller, scope.authority, scope.schema, await visibleView(context.prisma, scope, String(args.viewId)));
    },
  }),
  views: t.field({
    type: SavedViewPage,
    args: { ...tableAddressArgs, limit: t.arg.int({ validate: PageLimit.optional() }), cursor: t.arg.string({ validate: Cursor.optional() }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const scope = await viewContext(context, addressOf(args));
      const limit = args.limit ?? DEFAULT_PAGE_SIZE;
      const key = await cursorKey(context.prisma);
      const cursorScope = `views:${scope.schema.tableId}:${scope.caller.actorKey}`;
      const after = args.cursor ? decodeCursor(key, cursorScope, args.cursor, PagePosition).id : undefined;
      const visible = [{ visibility: 'shared' }, ...(scope.caller.userId ? [{ visibility: 'personal', ownerUserId: scope.caller.userId }] : [])];
      const rows = await context.prisma.savedView.findMany({
        where: { tableId: scope.schema.tableId, OR: visible, ...(after ? { id: { gt: after } } : {}) },
        orderBy: { id: 'asc' },
        take: limit + 1,
      });
      return pageOf(rows, limit, (view) => toViewShape(scope.caller, scope.authority, scope.schema, view), (last) =>
        encodeCursor(key, cursorScope, { id: last.id }));
    },
  }),
}));

builder.mutationFields((t) => ({
  createView: t.field({
    type: SavedView,
    description: 'Saves a view (endpoint 1). Shared views need current row write authority; 100 views per scope.',
    args: { idempotencyKey: t.arg.string({ required: true }), ...tableAddressArgs, input: t.arg({ type: CreateViewInput, required: true }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const body = CreateViewBody.parse(args.input);
      const address = addressOf(args);
      const scope = await viewContext(context, address);
      return idempotent(context, { operation: 'createView', key: args.idempotencyKey, input: { ...address, ...body } }, (tx) =>
        createView(tx, scope, body));
    },
  }),
  updateView: t.field({
    type: SavedView,
    description: 'Renames a view, moves it between personal and shared, or replaces its definition.',
    args: {
      idempotencyKey: t.arg.string({ required: true }), ...tableAddressArgs, viewId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: UpdateViewInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const body = UpdateViewBody.parse(args.input);
      const address = addressOf(args);
      const viewId = String(args.viewId);
      const scope = await viewContext(context, address);
      return idempotent(context, { operation: 'updateView', key: args.idempotencyKey, input: { ...address, viewId, ...body } }, (tx) =>
        updateView(tx, scope, viewId, body));
    },
  }),
  deleteView: t.field({
    type: ViewDeletion,
    description: 'Deletes a view (endpoint 2): its owner for a personal view, row write authority for a shared one.',
    args: {
      idempotencyKey: t.arg.string({ required: true }), ...tableAddressArgs, viewId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: DeleteViewInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const body = DeleteViewBody.parse(args.input);
      const address = addressOf(args);
      const viewId = String(args.viewId);
      const scope = await viewContext(context, address);
      return idempotent(context, { operation: 'deleteView', key: args.idempotencyKey, input: { ...address, viewId, ...body } }, (tx) =>
        deleteView(tx, scope, viewId, body));
    },
  }),
}));
