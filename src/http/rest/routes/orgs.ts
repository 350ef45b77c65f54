import { OrgResponse, UpdateOrgBody } from '../../../contracts/orgs.ts';
import { GetOrgDocument, UpdateOrgDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const orgRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}',
    summary: 'Get an organisation',
    tags: ['orgs'],
    operation: GetOrgDocument,
    response: OrgResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/orgs/{orgId}',
    summary: 'Rename an organisation (admins)',
    tags: ['orgs'],
    operation: UpdateOrgDocument,
    body: UpdateOrgBody,
    response: OrgResponse,
  }),
];
