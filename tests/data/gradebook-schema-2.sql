-- A gradebook as the grader wrote it at schema 2 (before removed adjustments were kept): four students'
-- answers to a written question, two marks of one answer, three adjustments of which the third was
-- removed (schema 2 deleted it). SOLUTIONS stands for the folder of the solution notebook.
BEGIN TRANSACTION;
CREATE TABLE adjustments (
    id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, assignment TEXT NOT NULL,
    points REAL NOT NULL, reason TEXT NOT NULL, created_at TEXT NOT NULL, grader TEXT NOT NULL DEFAULT '', cap INTEGER NOT NULL DEFAULT 0);
INSERT INTO "adjustments" VALUES(1,'bob','06_attention',1.5,'exercise 1 answered in a markdown cell; graded by hand','2026-11-27T13:33:20+00:00','Ana Ruiz',0);
INSERT INTO "adjustments" VALUES(2,'cy','06_attention',3.0,'extra credit','2026-11-27T13:33:20+00:00','Prof. Keller',1);
CREATE TABLE deadlines (
    assignment TEXT PRIMARY KEY, due TEXT NOT NULL, percent_per_day REAL NOT NULL,
    max_percent REAL NOT NULL, grace_minutes REAL NOT NULL);
CREATE TABLE history (
    student TEXT NOT NULL, assignment TEXT NOT NULL, attempt INTEGER NOT NULL,
    status TEXT NOT NULL, score REAL NOT NULL, max_score REAL NOT NULL,
    solutions_sha256 TEXT NOT NULL, graded_at TEXT NOT NULL, run INTEGER,
    tests TEXT NOT NULL, replaced_at TEXT NOT NULL, replaced_by_run INTEGER);
CREATE TABLE marks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, assignment TEXT NOT NULL,
    grade_id TEXT NOT NULL, points REAL NOT NULL, rubric TEXT NOT NULL, comment TEXT NOT NULL,
    grader TEXT NOT NULL, answer_sha256 TEXT NOT NULL, created_at TEXT NOT NULL);
INSERT INTO "marks" VALUES(1,'ada','06_attention','ex9_answer',2.0,'saturation and vanishing gradients','Exactly.','Ana Ruiz','cb6f8e9977417128899ef7479d027fae6b52abb06b525e4dc89379ac4a6f4576','2026-11-27T13:33:20+00:00');
INSERT INTO "marks" VALUES(2,'ada','06_attention','ex9_answer',1.0,'one of the two','On second reading: half.','Ben Okafor','cb6f8e9977417128899ef7479d027fae6b52abb06b525e4dc89379ac4a6f4576','2026-11-27T13:33:20+00:00');
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO "meta" VALUES('roster_source','roster');
INSERT INTO "meta" VALUES('roster_kind','csv');
INSERT INTO "meta" VALUES('roster_id_column','student_id');
INSERT INTO "meta" VALUES('lms_columns','[]');
INSERT INTO "meta" VALUES('schema','2');
CREATE TABLE results (
    student TEXT NOT NULL, assignment TEXT NOT NULL, attempt INTEGER NOT NULL,
    status TEXT NOT NULL, score REAL NOT NULL, max_score REAL NOT NULL,
    file TEXT, submission_sha256 TEXT, submitted_at TEXT, submitted_from TEXT,
    solutions_path TEXT NOT NULL, solutions_sha256 TEXT NOT NULL,
    graded_at TEXT NOT NULL, seconds REAL NOT NULL, run INTEGER,
    tests TEXT NOT NULL, notes TEXT NOT NULL, manual TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (student, assignment, attempt));
INSERT INTO "results" VALUES('ada','06_attention',1,'graded',2.0,2.0,'06_attention.ipynb','file-ada',NULL,NULL,'SOLUTIONS/06_attention.ipynb','s1','2026-11-27T13:33:20+00:00',0.0,NULL,'[{"grade_id": "ex1_test", "exercise": "Exercise 1: Shapes", "points": 2.0, "max_points": 2.0, "status": "passed", "message": ""}]','[]','[{"grade_id": "ex9_answer", "exercise": "Exercise 9: Why divide by √d_k?", "points": 0.0, "max_points": 2.0, "status": "to be marked", "message": "", "answer": "Without it the softmax saturates: nearly one-hot weights, and gradients close to zero.", "answer_sha256": "cb6f8e9977417128899ef7479d027fae6b52abb06b525e4dc89379ac4a6f4576", "after": "ex1_test"}]');
INSERT INTO "results" VALUES('bob','06_attention',1,'graded',2.0,2.0,'06_attention.ipynb','file-bob',NULL,NULL,'SOLUTIONS/06_attention.ipynb','s1','2026-11-27T13:33:20+00:00',0.0,NULL,'[{"grade_id": "ex1_test", "exercise": "Exercise 1: Shapes", "points": 2.0, "max_points": 2.0, "status": "passed", "message": ""}]','[]','[{"grade_id": "ex9_answer", "exercise": "Exercise 9: Why divide by √d_k?", "points": 0.0, "max_points": 2.0, "status": "to be marked", "message": "", "answer": "The scores get big, so the weights <b>saturate</b>.", "answer_sha256": "e57817026f740a1dee4a531f92365079241cff49b827411b171194f4557af25c", "after": "ex1_test"}]');
INSERT INTO "results" VALUES('cy','06_attention',1,'graded',2.0,2.0,'06_attention.ipynb','file-cy',NULL,NULL,'SOLUTIONS/06_attention.ipynb','s1','2026-11-27T13:33:20+00:00',0.0,NULL,'[{"grade_id": "ex1_test", "exercise": "Exercise 1: Shapes", "points": 2.0, "max_points": 2.0, "status": "passed", "message": ""}]','[]','[{"grade_id": "ex9_answer", "exercise": "Exercise 9: Why divide by √d_k?", "points": 0.0, "max_points": 2.0, "status": "not attempted", "message": "not answered yet", "answer": "YOUR ANSWER HERE", "answer_sha256": "2f2cafa761220b58ecf5b35ad96e9114a70a581a6c12e26eb127317e35c601a0", "after": "ex1_test"}]');
INSERT INTO "results" VALUES('zoë','06_attention',1,'graded',2.0,2.0,'06_attention.ipynb','file-zoë',NULL,NULL,'SOLUTIONS/06_attention.ipynb','s1','2026-11-27T13:33:20+00:00',0.0,NULL,'[{"grade_id": "ex1_test", "exercise": "Exercise 1: Shapes", "points": 2.0, "max_points": 2.0, "status": "passed", "message": ""}]','[]','[{"grade_id": "ex9_answer", "exercise": "Exercise 9: Why divide by √d_k?", "points": 0.0, "max_points": 2.0, "status": "to be marked", "message": "", "answer": "Um die Varianz auf 1 zu bringen.", "answer_sha256": "6041d4825f543afda7e9f8afd3172b7662846fbfcaae0887bba7772870d0cb77", "after": "ex1_test"}]');
CREATE TABLE roster (student TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
    extra TEXT NOT NULL, position INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'active');
INSERT INTO "roster" VALUES('ada','Ada Byron','','{}',0,'active');
INSERT INTO "roster" VALUES('bob','Bob Smith','','{}',1,'active');
INSERT INTO "roster" VALUES('cy','Cy Young','','{}',2,'active');
INSERT INTO "roster" VALUES('zoë','Zoë Müller','','{}',3,'active');
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, finished_at TEXT,
    command TEXT NOT NULL, solutions TEXT NOT NULL, warnings TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', changes TEXT NOT NULL DEFAULT '[]');
CREATE TABLE unpacked (
    student TEXT NOT NULL, assignment TEXT NOT NULL, entry TEXT NOT NULL, sha256 TEXT,
    late INTEGER NOT NULL, notes TEXT NOT NULL, skipped TEXT, unpacked_at TEXT NOT NULL,
    PRIMARY KEY (student, assignment));
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('marks',2);
INSERT INTO "sqlite_sequence" VALUES('adjustments',3);
COMMIT;
