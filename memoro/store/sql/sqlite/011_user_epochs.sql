-- Which life of a user id a piece of work began in. Work that stores a
-- user's rows over many transactions (an import, `memoro watch`) takes the
-- user's epoch when it starts and every one of its writes checks it, in the
-- same transaction; erasing the user deletes the row, so those writes are
-- refused from then on, while work started after the erase gets a new epoch
-- (from the generation clock, which only moves forward).
CREATE TABLE user_epochs (
    user_id TEXT PRIMARY KEY,
    epoch   INTEGER NOT NULL
);
