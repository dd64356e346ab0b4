-- One forget per subject: see storage/sqlite/migrations/0007_forget_per_subject.sql.
DROP INDEX forgets_by_sid;
CREATE UNIQUE INDEX forgets_one_per_sid ON forgets(sid);
