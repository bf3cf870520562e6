#!/bin/bash
tr a-z A-Z < /app/queue.dat > /app/output.txt
