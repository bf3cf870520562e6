#!/bin/bash
tr a-z A-Z < /app/queue.txt > /app/final.txt
