import { z } from 'zod';
import { Id, Timestamp, VersionString } from '../../../kernel/formats.ts';
import { UpdateOrgBody } from '../../../graph/orgs/orgs.ts';
import { GetOrgDocument, UpdateOrgDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const OrgResponse = z.strictObject({
  id: Id,
  name: z.string().min(1).max(120),
  version: VersionString,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const OrgPath = z.strictObject({ orgId: Id });

export const orgRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}',
    summary: 'Get an organisation',
    tags: ['orgs'],
    operation: GetOrgDocument,
    params: OrgPath,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: OrgResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/orgs/{orgId}',
    summary: 'Rename an organisation (admins)',
    tags: ['orgs'],
    operation: UpdateOrgDocument,
    params: OrgPath,
    query: z.strictObject({}),
    body: UpdateOrgBody,
    idempotent: true,
    successStatus: 200,
    response: OrgResponse,
  }),
];
