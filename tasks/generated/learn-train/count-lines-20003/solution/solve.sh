#!/bin/bash
wc -l < /app/queue.txt > /app/result.txt
