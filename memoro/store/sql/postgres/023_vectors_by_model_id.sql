-- What a server reads of a cached user since its last look is the vectors
-- of its model above an id. An index of (user, model, id) reaches exactly
-- those, whatever the planner's statistics say and however many vectors of
-- another model (a reindex's, or the old model's after a change) have
-- higher ids; it also serves the first read of a user's vectors. It
-- replaces (user, model, chunk), whose lookups by chunk vectors_chunk
-- serves. Building it holds writes to vectors until it is done.
CREATE INDEX vectors_user_model_id ON vectors (user_id, model, id);
DROP INDEX vectors_user;
