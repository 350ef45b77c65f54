import { z } from 'zod';
import { MeResponse, MyOrgResponse } from '../../../contracts/me.ts';
import { GetMeDocument, ListMyOrgsDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

export const meRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/me',
    summary: 'Who am I: the user and the credential (kind, scopes, ceiling)',
    tags: ['me'],
    operation: GetMeDocument,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: MeResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs',
    summary: 'The orgs the credential reaches, with the role there, by org id',
    tags: ['orgs'],
    operation: ListMyOrgsDocument,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(MyOrgResponse),
  }),
];
