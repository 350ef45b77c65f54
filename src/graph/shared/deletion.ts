import { builder } from '../server/builder.ts';

/** Spec 2.8: the answer of cancel invitation, revoke team key, revoke session (and the other revocations). */
export type DeletionShape = {
  deleted: boolean;
  mutationId: string;
};

export const Deletion = builder.objectRef<DeletionShape>('Deletion').implement({
  description: 'The result of a cancellation or revocation (spec 2.8).',
  fields: (t) => ({
    deleted: t.exposeBoolean('deleted'),
    mutationId: t.exposeID('mutationId'),
  }),
});
